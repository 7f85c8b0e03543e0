"""Random ops (uniform, normal, truncated_normal, dropout) through the C API.

numpy has no Philox-4x32 stream, so these tests check:
- the generator: a Python Philox-4x32-10 written from the paper's definition
  reproduces Random123's published known-answer vectors, and the ops'
  outputs decode to exactly its words for the documented stream layout
  (word j of (seed, offset) = philox(key=seed, counter=(j // 4, offset))[j % 4]);
- determinism: same seed and offset give identical bits on every device,
  a different offset or seed gives different numbers, and element i does not
  depend on the output's shape;
- distributions: moments within 5 sigma of the expected for large samples,
  Kolmogorov-Smirnov distances, bounds, dropout's keep rate and exact scaling.
"""
import math

import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
CPU = CTX.device_find("cpu")
FLOATS = ["f32", "f64", "f16", "bf16"]
DTYPE_IDS = {"f32": S.DTYPE_F32, "f64": S.DTYPE_F64, "f16": S.DTYPE_F16, "bf16": S.DTYPE_BF16}
N = 200_000  # samples for the statistical tests


# -- helpers -------------------------------------------------------------------

def gen(op, device=CPU, **attrs):
    return S.op_call(op, [], attrs, device=device)[0]


def raw(t):
    """The tensor's bytes, for bit-exact comparisons."""
    out = np.empty(t.nbytes, np.uint8)
    S.call("spora_tensor_read", t.handle, out.ctypes.data_as(S._vp), out.nbytes)
    return out


def bf16_to_f64(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def f32_to_bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def values(t):
    """float64 values of a float tensor (bf16 decoded from its bits)."""
    if t.dtype == S.DTYPE_BF16:
        return bf16_to_f64(raw(t).view(np.uint16).reshape(t.shape))
    return t.numpy().astype(np.float64)


def rounded(x, dtype):
    """x rounded to `dtype`, as float64."""
    if dtype == "bf16":
        return float(bf16_to_f64(f32_to_bf16_bits(np.float32(x))))
    return float({"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype](x))


def slack(dtype, magnitude):
    """Half a unit in the last place at `magnitude`: what rounding to the
    dtype may move a value by (0 for f64, whose outputs are not rounded)."""
    eps = {"f32": 2.0 ** -24, "f64": 0.0, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[dtype]
    return eps * magnitude


def ks_distance(sample, cdf):
    """Kolmogorov-Smirnov statistic of `sample` against the vectorised `cdf`."""
    x = np.sort(sample)
    n = len(x)
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


# P(sqrt(n) * D > 2.7) ~ 2 exp(-2 * 2.7^2) ~ 1e-6 under the hypothesis.
KS_LIMIT = 2.7

_erf = np.vectorize(math.erf)


def normal_cdf(x):
    return 0.5 * (1 + _erf(np.asarray(x) / math.sqrt(2)))


# -- Philox-4x32-10 from its definition (Salmon et al., SC'11) ------------------

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF


def philox(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return (c0, c1, c2, c3)


def words(seed, offset, n):
    """The first n words of the stream (seed, offset)."""
    seed &= (1 << 64) - 1
    key = (seed & MASK32, seed >> 32)
    out = []
    for b in range((n + 3) // 4):
        out.extend(philox((b & MASK32, b >> 32, offset & MASK32, offset >> 32), key))
    return np.array(out[:n], np.uint64)


# Random123's known-answer vectors (its tests/kat_vectors).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_python_philox_matches_known_answers(ctr, key, want):
    assert philox(ctr, key) == want


@pytest.mark.parametrize("device", DEVICES)
def test_known_answer_through_uniform(device):
    # seed 0, offset 0: block 0 is philox(counter 0, key 0), the first KAT
    # vector; f32 uniforms are the top 24 bits of each word over 2^24.
    u = values(gen("uniform", CTX.device_find(device), shape=[4], seed=0))
    got = [int(v * 2 ** 24) for v in u]
    assert got == [w >> 8 for w in KAT[0][2]]


SEEDS_OFFSETS = [(0, 0), (1, 0), (0, 1), (-1, 3), (2 ** 40 + 3, 2 ** 33 + 5), (123456789, 987654321)]


@pytest.mark.parametrize("seed,offset", SEEDS_OFFSETS)
def test_uniform_f32_is_the_stream_top_24_bits(seed, offset):
    u = values(gen("uniform", shape=[37], seed=seed, offset=offset))
    w = words(seed, offset, 37)
    np.testing.assert_array_equal((u * 2 ** 24).astype(np.uint64), w >> 8)


@pytest.mark.parametrize("seed,offset", SEEDS_OFFSETS)
def test_uniform_f64_takes_53_bits_from_word_pairs(seed, offset):
    u = values(gen("uniform", shape=[19], dtype="f64", seed=seed, offset=offset))
    w = words(seed, offset, 38)
    want = ((w[0::2] >> 5) << 26) | (w[1::2] >> 6)
    np.testing.assert_array_equal((u * 2.0 ** 53).astype(np.uint64), want)


@pytest.mark.parametrize("seed,offset", SEEDS_OFFSETS[:3])
def test_normal_f64_is_box_muller_of_the_stream(seed, offset):
    n = 22
    z = values(gen("normal", shape=[n], dtype="f64", seed=seed, offset=offset))
    w = words(seed, offset, 2 * n)
    want = []
    for k in range(n // 2):
        a, b, c, d = (int(v) for v in w[4 * k:4 * k + 4])
        u1 = ((((a >> 5) << 26) | (b >> 6)) + 1) * 2.0 ** -53
        u2 = (((c >> 5) << 26) | (d >> 6)) * 2.0 ** -53
        r = math.sqrt(-2 * math.log(u1))
        want += [r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)]
    np.testing.assert_allclose(z, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("seed,offset", SEEDS_OFFSETS[:3])
def test_normal_f32_pairs_use_word_pairs(seed, offset):
    n = 10
    z = values(gen("normal", shape=[n], seed=seed, offset=offset))
    w = words(seed, offset, n)
    want = []
    for k in range(n // 2):
        u1 = ((int(w[2 * k]) >> 8) + 1) * 2.0 ** -24
        u2 = (int(w[2 * k + 1]) >> 8) * 2.0 ** -24
        r = math.sqrt(-2 * math.log(u1))
        want += [r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)]
    np.testing.assert_allclose(z, np.float32(want), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_is_word_above_threshold(p):
    x = S.Tensor.from_numpy(CPU, np.ones(41, np.float32))
    _, m = S.op_call("dropout", [x], {"p": p, "seed": 77, "offset": 5}, num_outputs=2)
    w = words(77, 5, 41)
    np.testing.assert_array_equal(m.numpy(), w >= round(p * 2 ** 32))


# -- determinism ---------------------------------------------------------------

RANDOM_OPS = [
    ("uniform", {"low": -2.0, "high": 3.0}),
    ("normal", {"mean": 1.0, "std": 2.0}),
    ("truncated_normal", {"mean": 0.5, "std": 1.5, "a": -1.0, "b": 2.5}),
]


@pytest.mark.parametrize("op,attrs", RANDOM_OPS, ids=[o for o, _ in RANDOM_OPS])
@pytest.mark.parametrize("dtype", FLOATS)
def test_same_seed_and_offset_give_identical_bits_on_every_device(op, attrs, dtype):
    base = raw(gen(op, shape=[1001], dtype=dtype, seed=5, offset=9, **attrs))
    for name in DEVICES:
        got = raw(gen(op, CTX.device_find(name), shape=[1001], dtype=dtype, seed=5, offset=9, **attrs))
        np.testing.assert_array_equal(got, base, err_msg=f"{op} {dtype} on {name}")


@pytest.mark.parametrize("op,attrs", RANDOM_OPS, ids=[o for o, _ in RANDOM_OPS])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_other_offset_or_seed_gives_other_numbers(op, attrs, dtype):
    a = values(gen(op, shape=[256], dtype=dtype, seed=5, offset=0, **attrs))
    b = values(gen(op, shape=[256], dtype=dtype, seed=5, offset=1, **attrs))
    c = values(gen(op, shape=[256], dtype=dtype, seed=6, offset=0, **attrs))
    # Equal values at the same index would be a coincidence of 1 in 2^24.
    assert np.sum(a == b) <= 2 and np.sum(a == c) <= 2
    # Streams of neighbouring offsets are not shifted copies of each other.
    for shift in range(1, 9):
        assert not np.array_equal(a[shift:], b[:-shift])


@pytest.mark.parametrize("op,attrs", RANDOM_OPS, ids=[o for o, _ in RANDOM_OPS])
@pytest.mark.parametrize("dtype", FLOATS)
def test_element_depends_only_on_its_index(op, attrs, dtype):
    # A prefix of a longer draw, and any shape with the same elements,
    # give the same values: nothing depends on how the work is split.
    full = raw(gen(op, shape=[4099], dtype=dtype, seed=3, offset=2, **attrs))
    size = len(full) // 4099
    for shape in ([7], [3, 5], [2, 1, 11], [1025]):
        n = int(np.prod(shape))
        got = raw(gen(op, shape=shape, dtype=dtype, seed=3, offset=2, **attrs))
        np.testing.assert_array_equal(got, full[:n * size], err_msg=str(shape))


def test_zero_size_and_scalar_outputs():
    for op, attrs in RANDOM_OPS:
        t = gen(op, shape=[0, 5], seed=1, **attrs)
        assert t.shape == (0, 5) and t.numel == 0
        s = gen(op, shape=[], seed=1, **attrs)
        assert s.shape == () and np.isfinite(values(s))


# -- distributions ---------------------------------------------------------------

def check_moments(x, mean, var, mu4, dtype, magnitude, what):
    """Sample mean and variance within 5 standard errors of the expected,
    plus what rounding to the dtype can shift them by."""
    n = len(x)
    tol_mean = 5 * math.sqrt(var / n) + slack(dtype, magnitude)
    assert abs(x.mean() - mean) <= tol_mean, f"{what}: mean {x.mean()} vs {mean} (tol {tol_mean})"
    tol_var = 5 * math.sqrt(max(mu4 - var * var, 0) / n) + 2 * math.sqrt(var) * slack(dtype, magnitude) * 2
    assert abs(x.var() - var) <= tol_var, f"{what}: variance {x.var()} vs {var} (tol {tol_var})"


def check_uncorrelated(x, what):
    r = np.corrcoef(x[:-1], x[1:])[0, 1]
    assert abs(r) < 5 / math.sqrt(len(x)), f"{what}: lag-1 correlation {r}"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-3.0, 5.0), (100.0, 104.0)])
def test_uniform_distribution(dtype, low, high):
    x = values(gen("uniform", shape=[N], dtype=dtype, low=low, high=high, seed=2024, offset=1))
    what = f"uniform[{low}, {high}) {dtype}"
    assert x.min() >= rounded(low, dtype) and x.max() < high, f"{what}: range [{x.min()}, {x.max()}]"
    w = high - low
    mag = max(abs(low), abs(high))
    check_moments(x, (low + high) / 2, w * w / 12, w ** 4 / 80, dtype, mag, what)
    check_uncorrelated(x, what)
    if dtype in ("f32", "f64"):
        d = ks_distance(x, lambda v: np.clip((v - low) / w, 0, 1))
        assert d * math.sqrt(N) < KS_LIMIT, f"{what}: KS distance {d}"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mean,std", [(0.0, 1.0), (-3.0, 0.25), (10.0, 4.0)])
def test_normal_distribution(dtype, mean, std):
    x = values(gen("normal", shape=[N], dtype=dtype, mean=mean, std=std, seed=7, offset=3))
    what = f"normal({mean}, {std}) {dtype}"
    assert np.all(np.isfinite(x))
    mag = abs(mean) + 3 * std
    check_moments(x, mean, std * std, 3 * std ** 4, dtype, mag, what)
    check_uncorrelated(x, what)
    # Box-Muller's two outputs of a pair are independent.
    r = np.corrcoef(x[0::2], x[1::2])[0, 1]
    assert abs(r) < 5 / math.sqrt(N / 2), f"{what}: pair correlation {r}"
    # Tail mass: P(|z| > 2) = 0.0455.
    frac = np.mean(np.abs(x - mean) > 2 * std)
    assert abs(frac - 0.0455003) < 5 * math.sqrt(0.0455 * 0.9545 / N) + 0.002 * (dtype in ("f16", "bf16"))
    if dtype in ("f32", "f64"):
        d = ks_distance((x - mean) / std, normal_cdf)
        assert d * math.sqrt(N) < KS_LIMIT, f"{what}: KS distance {d}"


def test_normal_with_zero_std_is_the_mean():
    np.testing.assert_array_equal(values(gen("normal", shape=[9], mean=2.5, std=0.0, seed=1)), 2.5)


def truncated_moments(a, b):
    """Mean, variance and fourth central moment of the standard normal
    truncated to [a, b], by quadrature (closed forms cancel badly in the
    tails)."""
    t = np.linspace(max(a, -12.0), min(b, 40.0), 400001)
    dens = np.exp(-0.5 * (t * t - t[0] * t[0] if t[0] > 0 else t * t))  # scaled: no underflow far out
    integrate = np.trapezoid if hasattr(np, "trapezoid") else np.trapz
    z = integrate(dens, t)
    mean = integrate(t * dens, t) / z
    var = integrate((t - mean) ** 2 * dens, t) / z
    mu4 = integrate((t - mean) ** 4 * dens, t) / z
    return float(mean), float(var), float(mu4)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("a,b", [(-2.0, 2.0), (0.5, 3.0), (-6.0, -5.0), (8.0, 30.0), (-1.0, math.inf),
                                 (0.0, math.inf), (-math.inf, math.inf)])
def test_truncated_normal_distribution(dtype, a, b):
    mean, std = 1.0, 2.0
    x = values(gen("truncated_normal", shape=[N], dtype=dtype, mean=mean, std=std, a=a, b=b, seed=11, offset=4))
    what = f"truncated_normal[{a}, {b}] {dtype}"
    assert np.all(np.isfinite(x))
    lo = -math.inf if a == -math.inf else rounded(mean + std * a, dtype)
    hi = math.inf if b == math.inf else rounded(mean + std * b, dtype)
    assert x.min() >= lo and x.max() <= hi, f"{what}: range [{x.min()}, {x.max()}] outside [{lo}, {hi}]"
    m, v, mu4 = truncated_moments(a, b)
    mag = abs(mean) + std * max(abs(m) + 3 * math.sqrt(v), 1.0)
    check_moments(x, mean + std * m, std * std * v, std ** 4 * mu4, dtype, mag, what)
    check_uncorrelated(x, what)
    if dtype in ("f32", "f64"):
        ca, cb = normal_cdf(a), normal_cdf(b)
        if cb - ca > 1e-3:  # the tails' CDF differences would lose precision here
            d = ks_distance((x - mean) / std, lambda t: np.clip((normal_cdf(t) - ca) / (cb - ca), 0, 1))
            assert d * math.sqrt(N) < KS_LIMIT, f"{what}: KS distance {d}"


# -- dropout -----------------------------------------------------------------------

def np_dtype_values(x64, dtype):
    """x64 rounded to `dtype` and back (the values a tensor of it holds)."""
    if dtype == "bf16":
        return bf16_to_f64(f32_to_bf16_bits(x64))
    return x64.astype({"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype]).astype(np.float64)


def make_x(device, x64, dtype):
    if dtype == "bf16":
        bits = f32_to_bf16_bits(x64)
        return S.Tensor.create_raw(device, S.DTYPE_BF16, bits.shape, bits, bits.nbytes)
    return S.Tensor.from_numpy(device, x64.astype({"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype]))


def scaled(x64, dtype, p):
    """Kept elements: x * (1 / (1 - p)), the product in x's compute type."""
    if dtype == "f64":
        return x64 * (1 / (1 - p))
    prod = (np_dtype_values(x64, dtype).astype(np.float32) * np.float32(1 / (1 - p)))
    return np_dtype_values(prod.astype(np.float64), dtype) if dtype != "f32" else prod.astype(np.float64)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keep_rate_and_exact_scaling(dtype, p):
    x64 = np.random.default_rng(0).uniform(-4, 4, N)
    xv = np_dtype_values(x64, dtype)
    y, m = S.op_call("dropout", [make_x(CPU, x64, dtype)], {"p": p, "seed": 31, "offset": 2}, num_outputs=2)
    y, m = values(y), m.numpy()
    assert m.dtype == np.bool_ and m.shape == (N,)
    rate = m.mean()
    assert abs(rate - (1 - p)) < 5 * math.sqrt(p * (1 - p) / N), f"keep rate {rate} for p={p}"
    np.testing.assert_array_equal(y[~m], 0.0)
    np.testing.assert_array_equal(y[m], scaled(xv, dtype, p)[m])
    check_uncorrelated(m.astype(np.float64), f"dropout mask p={p}")


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_identity_cases(device):
    dev = CTX.device_find(device)
    x64 = np.random.default_rng(1).standard_normal((3, 7))
    for attrs in ({"p": 0.0, "seed": 4}, {"p": 0.7, "training": False, "seed": 4, "offset": 99}):
        y, m = S.op_call("dropout", [make_x(dev, x64, "f32")], attrs, num_outputs=2)
        np.testing.assert_array_equal(y.numpy(), x64.astype(np.float32))
        assert m.numpy().all() and m.shape == (3, 7)


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_p_one_drops_everything(device):
    x = make_x(CTX.device_find(device), np.array([1.0, -np.inf, np.nan, 5.0]), "f32")
    y, m = S.op_call("dropout", [x], {"p": 1.0, "seed": 4}, num_outputs=2)
    np.testing.assert_array_equal(y.numpy(), 0.0)
    assert not m.numpy().any()


def test_dropped_inf_and_nan_become_zero():
    x64 = np.full(4096, np.nan)
    x64[::2] = np.inf
    y, m = S.op_call("dropout", [make_x(CPU, x64, "f32")], {"p": 0.5, "seed": 8}, num_outputs=2)
    y, m = y.numpy(), m.numpy()
    np.testing.assert_array_equal(y[~m], 0.0)
    assert np.all(~np.isfinite(y[m]))


def test_dropout_mask_does_not_depend_on_dtype_or_values():
    x64 = np.random.default_rng(2).standard_normal(999)
    masks = []
    for dtype in FLOATS:
        _, m = S.op_call("dropout", [make_x(CPU, x64 * (1 + FLOATS.index(dtype)), dtype)],
                         {"p": 0.4, "seed": 12, "offset": 6}, num_outputs=2)
        masks.append(m.numpy())
    for m in masks[1:]:
        np.testing.assert_array_equal(m, masks[0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_cpu_and_other_devices_agree_bit_for_bit(dtype):
    x64 = np.random.default_rng(3).standard_normal((5, 201))
    base = [raw(t) for t in S.op_call("dropout", [make_x(CPU, x64, dtype)], {"p": 0.3, "seed": 1, "offset": 1},
                                      num_outputs=2)]
    for name in DEVICES:
        dev = CTX.device_find(name)
        got = [raw(t) for t in S.op_call("dropout", [make_x(dev, x64, dtype)], {"p": 0.3, "seed": 1, "offset": 1},
                                         num_outputs=2)]
        for g, b in zip(got, base):
            np.testing.assert_array_equal(g, b, err_msg=f"dropout {dtype} on {name}")


def test_repeated_calls_with_new_offsets_reuse_nothing_stale():
    # Kernels are cached per attributes: a new offset must give new numbers,
    # an old one the old numbers.
    a0 = values(gen("uniform", shape=[16], seed=9, offset=0))
    a1 = values(gen("uniform", shape=[16], seed=9, offset=1))
    assert not np.array_equal(a0, a1)
    np.testing.assert_array_equal(values(gen("uniform", shape=[16], seed=9, offset=0)), a0)
