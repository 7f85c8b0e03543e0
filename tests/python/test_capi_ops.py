"""Every op on every device against numpy, through the C API via ctypes.

Devices come from spora_device_count/get (never hard-coded), dtypes are f32
and f64. Results are compared with numpy computed in float64 from the same
inputs. Bad input must give an error status (never a crash) and a message
that names the op.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
REF_DEVICE = "cpu:0" if "cpu:0" in DEVICES else (DEVICES[0] if DEVICES else None)
OTHER_DEVICES = [d for d in DEVICES if d != REF_DEVICE]
DTYPES = [np.float32, np.float64]


def dtype_id(dt):
    return {np.float32: "f32", np.float64: "f64"}[dt]


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


@pytest.fixture(params=DTYPES, ids=dtype_id)
def dt(request):
    return request.param


# -- helpers -----------------------------------------------------------------

def rng(seed=0):
    return np.random.default_rng(seed)


def rand(shape, dt, seed=0, lo=-3.0, hi=3.0):
    return rng(seed).uniform(lo, hi, size=shape).astype(dt)


def away_from_zero(shape, dt, seed=0):
    r = rng(seed)
    return (r.choice([-1.0, 1.0], size=shape) * r.uniform(0.5, 2.0, size=shape)).astype(dt)


def tol(dt, transcendental=False):
    """(rtol, atol) for results compared with a float64 numpy reference."""
    if dt == np.float32:
        return (3e-5, 2e-6) if transcendental else (1e-5, 1e-6)
    return (1e-12, 1e-12)


def run_op(dev, op, arrays, attrs=None):
    """Uploads `arrays` to `dev`, runs `op`, checks where the result lives,
    and returns it as numpy."""
    ins = [S.Tensor.from_numpy(dev, a) for a in arrays]
    (out,) = S.op_call(op, ins, attrs)
    assert out.device == dev, f"{op}: result on {out.device.name}, inputs on {dev.name}"
    return out.numpy()


def assert_close(got, ref, dt, transcendental=False):
    assert got.dtype == np.dtype(dt), f"dtype {got.dtype}, want {np.dtype(dt)}"
    assert got.shape == ref.shape, f"shape {got.shape}, want {ref.shape}"
    rtol, atol = tol(dt, transcendental)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


def expect_error(status, fragments, fn, *args, **kwargs):
    """Runs fn expecting SporaError with `status` whose message contains
    every string in `fragments`; returns the error."""
    with pytest.raises(S.SporaError) as info:
        fn(*args, **kwargs)
    e = info.value
    assert e.status == status, f"status {e.status} ({S.status_string(e.status)}), want {status}: {e.message}"
    for f in fragments:
        assert f in e.message, f"{f!r} not in error message {e.message!r}"
    return e


# -- devices, tensors, binding -----------------------------------------------

def test_version_and_ops_listed():
    assert S.version() == (0, 1, 0)
    names = S.op_names()
    for op in ["neg", "exp", "log", "tanh", "relu", "sigmoid", "add", "sub", "mul", "div", "matmul", "sum",
               "mean", "reshape", "transpose", "softmax"]:
        assert op in names
        assert S.op_schema(op).startswith(op + "(")


def test_devices_listed():
    assert DEVICES, "the context lists no devices"
    assert len(set(DEVICES)) == len(DEVICES)
    for i, name in enumerate(DEVICES):
        assert ":" in name
        d = CTX.device_get(i)
        assert d.name == name
        assert CTX.device_find(name) == d
    # A name without ":N" means device 0.
    for name in DEVICES:
        backend, index = name.split(":")
        if index == "0":
            assert CTX.device_find(backend).name == name


def test_context_lifecycle_and_tensors_outliving_it():
    ctx = S.Context()
    assert [d.name for d in ctx.devices()] == DEVICES
    kept = [S.Tensor.from_numpy(d, np.arange(4, dtype=np.float32)) for d in ctx.devices()]
    ctx.free()
    # Devices are process-wide and tensors may outlive the context.
    for t in kept:
        (y,) = S.op_call("mul", [t, t])
        np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype=np.float32) ** 2)
    with S.Context() as c2:
        assert c2.device_count() == len(DEVICES)
    S.call("spora_tensor_free", None)  # NULL is a no-op
    S.call("spora_attrs_free", None)


@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (0,), (3, 0, 2), (1, 1, 1, 1, 1, 1, 1, 3)],
                         ids=str)
def test_tensor_roundtrip_and_metadata(dev, dt, shape):
    a = rand(shape, dt, seed=1)
    t = S.Tensor.from_numpy(dev, a)
    assert t.shape == shape
    assert t.dtype == (S.DTYPE_F32 if dt == np.float32 else S.DTYPE_F64)
    assert t.numel == a.size
    assert t.nbytes == a.nbytes
    assert t.device == dev
    b = t.numpy()
    assert b.shape == shape and b.dtype == a.dtype
    assert a.tobytes() == b.tobytes()


def test_tensor_create_zero_filled(dev, dt):
    t = S.Tensor.create_raw(dev, S.DTYPE_F32 if dt == np.float32 else S.DTYPE_F64, (3, 4), None, 0)
    np.testing.assert_array_equal(t.numpy(), np.zeros((3, 4), dt))


def test_tensor_from_non_contiguous_numpy(dev, dt):
    a = rand((4, 6), dt, seed=2)[:, ::2].T  # the binding makes it C-contiguous
    np.testing.assert_array_equal(S.Tensor.from_numpy(dev, a).numpy(), a)


# -- unary ops ---------------------------------------------------------------

def _sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


UNARY = {
    # op: (numpy reference, input range, transcendental)
    "neg": (np.negative, (-5.0, 5.0), False),
    "exp": (np.exp, (-10.0, 10.0), True),
    "log": (np.log, (0.01, 100.0), True),
    "tanh": (np.tanh, (-5.0, 5.0), True),
    "relu": (lambda x: np.maximum(x, 0.0), (-5.0, 5.0), False),
    "sigmoid": (_sigmoid, (-20.0, 20.0), True),
}
UNARY_SHAPES = [(), (1,), (7,), (3, 5), (0,), (2, 0, 3), (4, 3, 2, 5), (1023,), (2, 1, 3, 1, 2, 1, 2, 3)]


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(dev, dt, op, shape):
    ref_fn, (lo, hi), trans = UNARY[op]
    x = rand(shape, dt, seed=3, lo=lo, hi=hi)
    got = run_op(dev, op, [x])
    assert_close(got, np.asarray(ref_fn(x.astype(np.float64))), dt, trans)


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 88.0, -88.0, 700.0, -700.0, 1e-3])


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_special_values(dev, dt, op):
    ref_fn, _, trans = UNARY[op]
    x = SPECIAL.astype(dt)
    if op == "relu":
        x = x[~np.isnan(x)]  # relu(nan) is not specified
    with np.errstate(all="ignore"):
        ref = np.asarray(ref_fn(x.astype(np.float64))).astype(dt).astype(np.float64)
        got = run_op(dev, op, [x])
    assert_close(got, ref, dt, trans)


def test_sigmoid_extremes_saturate_without_nan(dev, dt):
    x = np.array([-1e4, -500.0, -100.0, 100.0, 500.0, 1e4], dt)
    got = run_op(dev, "sigmoid", [x])
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, [0, 0, 0, 1, 1, 1], atol=1e-30, rtol=0)


# -- binary ops --------------------------------------------------------------

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
BINARY_SHAPES = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((), ()),
    ((4, 1, 5), (3, 1)),
    ((3, 1), (4, 1, 5)),
    ((1,), (7,)),
    ((7,), (1,)),
    ((1, 1), (1,)),
    ((0, 3), (3,)),
    ((2, 0), (2, 1)),
    ((1, 0), (3, 1)),
    ((0,), ()),
    ((17, 33), (33,)),
    ((3, 5, 7), (5, 1)),
    ((2, 1, 3, 1, 5), (4, 1, 6, 1)),
    ((1, 1, 1, 1, 1, 1, 1, 9), (9,)),
    ((2, 1, 2, 1, 2, 1, 2, 1), (1, 2, 1, 2, 1, 2, 1, 2)),
    ((257, 129), (257, 1)),
]


@pytest.mark.parametrize("sa,sb", BINARY_SHAPES, ids=lambda s: str(s))
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(dev, dt, op, sa, sb):
    x = rand(sa, dt, seed=4)
    y = away_from_zero(sb, dt, seed=5) if op == "div" else rand(sb, dt, seed=5)
    got = run_op(dev, op, [x, y])
    ref = BINARY[op](x.astype(np.float64), y.astype(np.float64))
    assert_close(got, np.asarray(ref), dt)


def test_binary_same_tensor_twice(dev, dt):
    x = rand((4, 5), dt, seed=6)
    t = S.Tensor.from_numpy(dev, x)
    for op, fn in BINARY.items():
        (out,) = S.op_call(op, [t, t])
        with np.errstate(all="ignore"):
            assert_close(out.numpy(), fn(x.astype(np.float64), x.astype(np.float64)), dt)


def test_div_by_zero_follows_ieee(dev, dt):
    x = np.array([1.0, -1.0, 0.0], dt)
    y = np.array([0.0, 0.0, 0.0], dt)
    got = run_op(dev, "div", [x, y])
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


# -- reductions --------------------------------------------------------------

REDUCE_CASES = [
    # (shape, axes or None for no attribute, keepdims or None for no attribute)
    ((3, 4, 5), None, None),
    ((3, 4, 5), [], None),
    ((3, 4, 5), [], True),
    ((3, 4, 5), [0], False),
    ((3, 4, 5), [1], True),
    ((3, 4, 5), [-1], False),
    ((3, 4, 5), [-1], True),
    ((3, 4, 5), [0, 2], False),
    ((3, 4, 5), [2, 0], True),
    ((3, 4, 5), [-1, 0], False),
    ((3, 4, 5), [-3, -2], True),
    ((3, 4, 5), [0, 1, 2], False),
    ((3, 4, 5), [0, 1, 2], True),
    ((7,), [0], False),
    ((7,), None, True),
    ((), None, None),
    ((), [], True),
    ((1, 1), [0], False),
    ((7, 1, 9), [1], False),
    ((7, 1, 9), [0, 2], True),
    ((2, 3, 1, 4, 5, 1, 3), [0, 3, -1], False),
    ((33, 65), [0], False),
    ((33, 65), [1], True),
]


def _reduce_attrs(axes, keepdims):
    attrs = {}
    if axes is not None:
        attrs["axes"] = list(axes)
    if keepdims is not None:
        attrs["keepdims"] = bool(keepdims)
    return attrs or None


def _np_axes(axes):
    return None if not axes else tuple(axes)


@pytest.mark.parametrize("shape,axes,keepdims", REDUCE_CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_reduce(dev, dt, op, shape, axes, keepdims):
    x = rand(shape, dt, seed=7)
    got = run_op(dev, op, [x], _reduce_attrs(axes, keepdims))
    fn = np.sum if op == "sum" else np.mean
    ref = np.asarray(fn(x.astype(np.float64), axis=_np_axes(axes), keepdims=bool(keepdims)))
    assert_close(got, ref, dt)


@pytest.mark.parametrize("shape,axes,keepdims", [
    ((0, 3), [0], False),
    ((0, 3), None, None),
    ((0, 3), None, True),
    ((2, 0, 3), [1], True),
    ((0,), None, None),
], ids=str)
def test_sum_over_zero_size_is_zero(dev, dt, shape, axes, keepdims):
    x = np.zeros(shape, dt)
    got = run_op(dev, "sum", [x], _reduce_attrs(axes, keepdims))
    ref = np.sum(x.astype(np.float64), axis=_np_axes(axes), keepdims=bool(keepdims))
    assert_close(got, np.asarray(ref), dt)


def test_reduce_keeping_zero_size_dims(dev, dt):
    # Reducing a non-empty axis of a zero-size tensor gives a zero-size result.
    x = np.zeros((0, 3), dt)
    for op in ["sum", "mean"]:
        got = run_op(dev, op, [x], {"axes": [1]})
        assert got.shape == (0,) and got.dtype == dt


def test_reduce_axes_as_single_int(dev, dt):
    # A lone int for an ints attribute is accepted (lossless conversion).
    x = rand((3, 4), dt, seed=8)
    got = run_op(dev, "sum", [x], {"axes": -1})
    assert_close(got, x.astype(np.float64).sum(axis=-1), dt)


def test_reduce_keepdims_as_int(dev, dt):
    x = rand((3, 4), dt, seed=9)
    got = run_op(dev, "mean", [x], {"axes": [0], "keepdims": 1})
    assert_close(got, x.astype(np.float64).mean(axis=0, keepdims=True), dt)


def _large_sum_tol(dt, x64):
    # A sensible float32 bound: blocked or pairwise float32 accumulation
    # stays well inside 1e-5 * sum|x| for 1e6 values; a float64 accumulator
    # is far inside it.
    return (1e-5 if dt == np.float32 else 1e-12) * np.abs(x64).sum()


@pytest.mark.parametrize("signed", [False, True], ids=["positive", "mixed-sign"])
def test_large_sum(dev, dt, signed):
    n = 1_000_003
    x = rng(10).uniform(-1.0 if signed else 0.0, 1.0, size=n).astype(dt)
    x64 = x.astype(np.float64)
    got = run_op(dev, "sum", [x])
    assert got.shape == () and got.dtype == dt
    assert abs(float(got) - x64.sum()) <= _large_sum_tol(dt, x64), (float(got), x64.sum())
    got = run_op(dev, "mean", [x])
    assert abs(float(got) - x64.mean()) <= _large_sum_tol(dt, x64) / n


def test_large_sum_along_axes(dev, dt):
    x = rng(11).uniform(0.0, 1.0, size=(1000, 1001)).astype(dt)
    x64 = x.astype(np.float64)
    for axis in (0, 1):
        got = run_op(dev, "sum", [x], {"axes": [axis]})
        ref = x64.sum(axis=axis)
        assert got.shape == ref.shape
        bound = (1e-5 if dt == np.float32 else 1e-12) * ref + (1e-6 if dt == np.float32 else 1e-12)
        assert np.all(np.abs(got - ref) <= bound)


# -- matmul ------------------------------------------------------------------

def _matmul_ref(a, b, ta, tb):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if ta and a.ndim >= 2:
        a64 = np.swapaxes(a64, -1, -2)
    if tb and b.ndim >= 2:
        b64 = np.swapaxes(b64, -1, -2)
    return np.matmul(a64, b64), np.matmul(np.abs(a64), np.abs(b64)), a64.shape[-1]


def assert_matmul_close(got, a, b, dt, ta=False, tb=False):
    ref, absref, k = _matmul_ref(a, b, ta, tb)
    assert got.dtype == np.dtype(dt)
    assert got.shape == ref.shape, f"shape {got.shape}, want {ref.shape}"
    # Standard error bound of a K-term dot product: |err| <= K eps sum|a||b|.
    eps = np.finfo(dt).eps
    bound = (k + 2) * eps * absref + np.finfo(dt).tiny
    bad = np.abs(got - ref) > bound
    assert not bad.any(), (f"{bad.sum()} of {bad.size} elements off; first at {np.argwhere(bad)[0]}: "
                           f"got {got[tuple(np.argwhere(bad)[0])]}, want {ref[tuple(np.argwhere(bad)[0])]}")


MATMUL_CASES = [
    # (shape a, shape b, transpose_a, transpose_b)
    ((2, 3), (3, 4), False, False),
    ((1, 1), (1, 1), False, False),
    ((17, 31), (31, 13), False, False),
    ((3,), (3, 4), False, False),
    ((2, 3), (3,), False, False),
    ((3,), (3,), False, False),
    ((5, 2, 3), (3, 4), False, False),
    ((2, 3), (5, 3, 4), False, False),
    ((5, 2, 3), (5, 3, 4), False, False),
    ((5, 2, 3), (1, 3, 4), False, False),
    ((1, 2, 3), (5, 3, 4), False, False),
    ((2, 1, 3, 4), (5, 4, 2), False, False),
    ((3, 1, 2, 3), (1, 4, 3, 2), False, False),
    ((3,), (5, 3, 4), False, False),
    ((5, 2, 3), (3,), False, False),
    ((3, 2), (3, 4), True, False),
    ((2, 3), (4, 3), False, True),
    ((3, 2), (4, 3), True, True),
    ((5, 3, 2), (1, 4, 3), True, True),
    ((5, 3, 2), (3, 4), True, False),
    ((2, 3), (5, 4, 3), False, True),
    ((1, 3, 2), (5, 3, 4), True, False),
    ((3,), (4, 3), False, True),   # transposes of 1-D operands are ignored
    ((4, 3), (4,), True, False),
    ((3,), (3,), True, True),
    ((5, 2, 3), (1, 4, 3), False, True),
    ((2, 5, 3, 4), (1, 5, 4, 2), False, False),
    ((2, 5, 3, 4), (2, 1, 2, 4), False, True),
    ((2, 5, 4, 3), (2, 1, 4, 2), True, False),
    ((1, 1, 2, 3), (3, 4), False, False),
    ((128, 256), (256, 64), False, False),
    ((128, 256), (64, 256), False, True),
    ((256, 128), (256, 64), True, False),
    ((0, 3), (3, 4), False, False),
    ((2, 0), (0, 4), False, False),
    ((2, 3), (3, 0), False, False),
    ((0, 2, 3), (3, 4), False, False),
    ((0,), (0,), False, False),
]


@pytest.mark.parametrize("sa,sb,ta,tb", MATMUL_CASES, ids=str)
def test_matmul(dev, dt, sa, sb, ta, tb):
    a = rand(sa, dt, seed=12)
    b = rand(sb, dt, seed=13)
    attrs = {}
    if ta:
        attrs["transpose_a"] = True
    if tb:
        attrs["transpose_b"] = True
    got = run_op(dev, "matmul", [a, b], attrs or None)
    assert_matmul_close(got, a, b, dt, ta, tb)


def test_matmul_explicit_false_transposes(dev, dt):
    a, b = rand((4, 5), dt, seed=14), rand((5, 6), dt, seed=15)
    got = run_op(dev, "matmul", [a, b], {"transpose_a": False, "transpose_b": False})
    assert_matmul_close(got, a, b, dt)


def test_matmul_repeated_calls_reuse_kernels(dev, dt):
    # Same shapes, different attrs and data: cached kernels must not mix up.
    a, b = rand((6, 6), dt, seed=16), rand((6, 6), dt, seed=17)
    for _ in range(2):
        for ta in (False, True):
            for tb in (False, True):
                got = run_op(dev, "matmul", [a, b], {"transpose_a": ta, "transpose_b": tb})
                assert_matmul_close(got, a, b, dt, ta, tb)


# -- layout ------------------------------------------------------------------

RESHAPE_CASES = [
    ((2, 3, 4), [4, 6], (4, 6)),
    ((2, 3, 4), [-1], (24,)),
    ((2, 3, 4), [2, -1], (2, 12)),
    ((2, 3, 4), [-1, 4], (6, 4)),
    ((2, 3, 4), [1, 24, 1], (1, 24, 1)),
    ((2, 3, 4), [2, 3, 4], (2, 3, 4)),
    ((2, 3, 4), [1, 1, 1, 1, 1, 2, 3, 4], (1, 1, 1, 1, 1, 2, 3, 4)),
    ((1, 1), [], ()),
    ((), [1], (1,)),
    ((), [-1], (1,)),
    ((7,), [7, 1], (7, 1)),
    ((0, 3), [-1], (0,)),
    ((0, 3), [3, -1], (3, 0)),
    ((0, 3), [3, 0, 5], (3, 0, 5)),
]


@pytest.mark.parametrize("shape,target,want", RESHAPE_CASES, ids=str)
def test_reshape(dev, dt, shape, target, want):
    x = rand(shape, dt, seed=18)
    got = run_op(dev, "reshape", [x], {"shape": target})
    assert got.shape == want and got.dtype == dt
    np.testing.assert_array_equal(got, x.reshape(want))


def test_reshape_is_a_view_that_outlives_its_source(dev, dt):
    x = rand((3, 8), dt, seed=19)
    t = S.Tensor.from_numpy(dev, x)
    (v,) = S.op_call("reshape", [t], {"shape": [4, -1]})
    (w,) = S.op_call("reshape", [v], {"shape": [2, 2, 6]})
    t.free()
    np.testing.assert_array_equal(v.numpy(), x.reshape(4, 6))
    (y,) = S.op_call("add", [w, w])
    v.free()
    np.testing.assert_array_equal(w.numpy(), x.reshape(2, 2, 6))
    assert_close(y.numpy(), 2 * x.astype(np.float64).reshape(2, 2, 6), dt)
    # A view moved to another device is a plain copy with the view's shape.
    for name in DEVICES:
        np.testing.assert_array_equal(w.to(CTX.device_find(name)).numpy(), x.reshape(2, 2, 6))


TRANSPOSE_CASES = [
    ((2, 3, 4), [1, 0, 2]),
    ((2, 3, 4), [2, 0, 1]),
    ((2, 3, 4), [0, 1, 2]),
    ((2, 3, 4), [-1, 0, -2]),
    ((2, 3, 4), None),
    ((2, 3, 4), []),
    ((5, 7), None),
    ((5, 7), [1, 0]),
    ((5,), None),
    ((), None),
    ((), []),
    ((0, 3), None),
    ((3, 0, 2), [2, 0, 1]),
    ((2, 3, 1, 5, 1), [4, 3, 0, 2, 1]),
    ((2, 1, 3, 1, 2, 1, 2, 3), [7, 0, 6, 1, 5, 2, 4, 3]),
    ((2, 1, 3, 1, 2, 1, 2, 3), None),
    ((33, 65), None),
]


@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES, ids=str)
def test_transpose(dev, dt, shape, perm):
    x = rand(shape, dt, seed=20)
    got = run_op(dev, "transpose", [x], None if perm is None else {"perm": perm})
    ref = np.transpose(x, None if not perm else perm)
    assert got.shape == ref.shape and got.dtype == dt
    np.testing.assert_array_equal(got, ref)


# -- softmax -----------------------------------------------------------------

def _softmax_ref(x, axis):
    x64 = x.astype(np.float64)
    if x64.ndim == 0:
        return np.asarray(1.0)
    m = np.max(x64, axis=axis, keepdims=True)
    e = np.exp(x64 - m)
    return e / e.sum(axis=axis, keepdims=True)


SOFTMAX_CASES = [
    ((3, 5), None),
    ((3, 5), -1),
    ((3, 5), 0),
    ((3, 5), 1),
    ((3, 5), -2),
    ((2, 3, 4), 0),
    ((2, 3, 4), 1),
    ((2, 3, 4), 2),
    ((2, 3, 4), -3),
    ((7,), 0),
    ((1,), 0),
    ((4, 1), 1),
    ((4, 1), 0),
    ((), None),
    ((), 0),
    ((), -1),
    ((2, 1, 3, 1, 5), 2),
    ((65, 257), 1),
    ((65, 257), 0),
]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=str)
def test_softmax(dev, dt, shape, axis):
    x = rand(shape, dt, seed=21, lo=-5, hi=5)
    got = run_op(dev, "softmax", [x], None if axis is None else {"axis": axis})
    assert_close(got, _softmax_ref(x, -1 if axis is None else axis), dt, transcendental=True)


@pytest.mark.parametrize("shape,axis", [((0, 5), 1), ((0, 5), 0), ((2, 0), 1), ((2, 0), 0)], ids=str)
def test_softmax_zero_size(dev, dt, shape, axis):
    x = np.zeros(shape, dt)
    got = run_op(dev, "softmax", [x], {"axis": axis})
    assert got.shape == shape and got.dtype == dt


@pytest.mark.parametrize("scale", [1e2, 1e4, 1e30], ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_large_magnitude_is_stable(dev, dt, scale, axis):
    x = (rand((4, 6), dt, seed=22, lo=-1, hi=1) * dt(scale)).astype(dt)
    x[0, :] = dt(scale)          # equal huge values: uniform row
    x[:, 0] = -dt(scale)         # huge negative values: zero weight
    got = run_op(dev, "softmax", [x], {"axis": axis})
    assert not np.isnan(got).any() and not np.isinf(got).any()
    assert_close(got, _softmax_ref(x, axis), dt, transcendental=True)
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=axis), 1.0, rtol=0, atol=1e-5)


# -- cross-device --------------------------------------------------------------

CROSS_CASES = [
    # (op, input shapes, attrs)
    ("neg", [(33, 17)], None),
    ("exp", [(33, 17)], None),
    ("log", [(33, 17)], None),
    ("tanh", [(33, 17)], None),
    ("relu", [(33, 17)], None),
    ("sigmoid", [(33, 17)], None),
    ("add", [(4, 1, 5), (3, 1)], None),
    ("sub", [(17, 33), (33,)], None),
    ("mul", [(), (5, 7)], None),
    ("div", [(5, 7), (7,)], None),
    ("matmul", [(3, 20, 30), (30, 10)], None),
    ("matmul", [(20, 30), (3, 10, 30)], {"transpose_b": True}),
    ("matmul", [(30, 20), (30,)], {"transpose_a": True}),
    ("matmul", [(128, 256), (256, 64)], None),
    ("sum", [(9, 10, 11)], {"axes": [0, -1], "keepdims": True}),
    ("sum", [(100_000,)], None),
    ("mean", [(9, 10, 11)], {"axes": [1]}),
    ("reshape", [(6, 4)], {"shape": [-1, 3]}),
    ("transpose", [(3, 4, 5)], {"perm": [2, 0, 1]}),
    ("softmax", [(9, 10, 11)], {"axis": 1}),
]


def _cross_inputs(op, shapes, dt):
    ins = []
    for i, s in enumerate(shapes):
        if op == "log":
            ins.append(rand(s, dt, seed=30 + i, lo=0.1, hi=10))
        elif op == "div" and i == 1:
            ins.append(away_from_zero(s, dt, seed=30 + i))
        else:
            ins.append(rand(s, dt, seed=30 + i))
    return ins


@pytest.mark.skipif(not OTHER_DEVICES, reason="only one device is listed")
@pytest.mark.parametrize("other", OTHER_DEVICES)
@pytest.mark.parametrize("op,shapes,attrs", CROSS_CASES, ids=lambda v: str(v))
def test_same_result_as_reference_device(dt, other, op, shapes, attrs):
    ins = _cross_inputs(op, shapes, dt)
    ref = run_op(CTX.device_find(REF_DEVICE), op, ins, attrs)
    got = run_op(CTX.device_find(other), op, ins, attrs)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if op == "matmul":
        # Backends may use different (fast) GEMMs: equal within the GEMM
        # error bound of both against the exact product.
        ta = (attrs or {}).get("transpose_a", False)
        tb = (attrs or {}).get("transpose_b", False)
        assert_matmul_close(ref, ins[0], ins[1], dt, ta, tb)
        assert_matmul_close(got, ins[0], ins[1], dt, ta, tb)
    else:
        rtol = 1e-6 if dt == np.float32 else 1e-14
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=0)


@pytest.mark.parametrize("src", DEVICES)
@pytest.mark.parametrize("dst", DEVICES)
@pytest.mark.parametrize("shape", [(), (0,), (3, 5), (2, 0, 4), (1001,)], ids=str)
def test_tensor_to_roundtrip(dt, src, dst, shape):
    d_src, d_dst = CTX.device_find(src), CTX.device_find(dst)
    x = rand(shape, dt, seed=40)
    if x.size >= 4:
        x.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    t = S.Tensor.from_numpy(d_src, x)
    moved = t.to(d_dst)
    assert moved.device == d_dst and moved.shape == shape and moved.dtype == t.dtype
    back = moved.to(d_src)
    t.free()  # the copies are independent of the source
    assert moved.numpy().tobytes() == x.tobytes()
    assert back.device == d_src
    assert back.numpy().tobytes() == x.tobytes()
    # And the copy is usable by ops where it now lives.
    if x.size:
        (y,) = S.op_call("neg", [moved])
        assert y.device == d_dst
        np.testing.assert_array_equal(y.numpy(), -x)


# -- floating-point environment -------------------------------------------------

FP_ENV_PROBE = textwrap.dedent("""
    import sys
    import numpy as np
    import spora_capi as S
    tiny = np.array([1e-310])          # a float64 subnormal
    before = (tiny * 1.0).view(np.uint64)[0]
    ctx = S.Context()
    dev = ctx.device_find(sys.argv[1])
    t = S.Tensor.from_numpy(dev, np.array([1.0, 2.0], np.float32))
    S.op_call("neg", [t])[0].numpy()
    after = (tiny * 1.0).view(np.uint64)[0]
    print(before, after)
""")


@pytest.mark.parametrize("device", DEVICES)
def test_ops_leave_the_callers_floating_point_environment_alone(device):
    """Running an op must not switch the calling thread to flush-to-zero /
    denormals-are-zero: that silently changes every later float computation
    of the host program (here numpy's 1e-310 * 1.0 becoming 0)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", FP_ENV_PROBE, device], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.split()
    assert before != "0", "the probe itself is broken: numpy flushed a subnormal before any Spora call"
    assert after == before, (f"after an op on {device}, the calling thread flushes subnormals: numpy's "
                             f"1e-310 * 1.0 gave bits {after} instead of {before}")


# -- bad input -----------------------------------------------------------------

INVALID = S.ERROR_INVALID_ARGUMENT


def test_error_shapes_do_not_broadcast(dev, dt):
    a, b = S.Tensor.from_numpy(dev, np.ones((2, 3), dt)), S.Tensor.from_numpy(dev, np.ones((4,), dt))
    for op in BINARY:
        expect_error(INVALID, [f"[{op}]", "(2,3)", "(4,)", "do not broadcast"], S.op_call, op, [a, b])
    c = S.Tensor.from_numpy(dev, np.ones((2, 0), dt))
    d = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[add]", "do not broadcast"], S.op_call, "add", [c, d])


def test_error_matmul_does_not_contract(dev, dt):
    a, b = S.Tensor.from_numpy(dev, np.ones((2, 3), dt)), S.Tensor.from_numpy(dev, np.ones((4, 5), dt))
    expect_error(INVALID, ["[matmul]", "(2,3)", "(4,5)", "do not contract"], S.op_call, "matmul", [a, b])
    expect_error(INVALID, ["[matmul]", "do not contract"], S.op_call, "matmul", [a, a])
    expect_error(INVALID, ["[matmul]", "do not contract"], S.op_call, "matmul", [a, a],
                 {"transpose_a": True, "transpose_b": True})
    v = S.Tensor.from_numpy(dev, np.ones((4,), dt))
    expect_error(INVALID, ["[matmul]", "do not contract"], S.op_call, "matmul", [a, v])
    expect_error(INVALID, ["[matmul]", "do not contract"], S.op_call, "matmul", [v, a])


def test_error_matmul_batch_dims_do_not_broadcast(dev, dt):
    a, b = S.Tensor.from_numpy(dev, np.ones((2, 2, 3), dt)), S.Tensor.from_numpy(dev, np.ones((3, 3, 4), dt))
    expect_error(INVALID, ["[matmul]", "batch"], S.op_call, "matmul", [a, b])


def test_error_matmul_scalar_operand(dev, dt):
    a, b = S.Tensor.from_numpy(dev, np.ones((), dt)), S.Tensor.from_numpy(dev, np.ones((3, 4), dt))
    expect_error(INVALID, ["[matmul]", "rank"], S.op_call, "matmul", [a, b])
    expect_error(INVALID, ["[matmul]", "rank"], S.op_call, "matmul", [b, a])


def test_error_dtype_mix(dev):
    a = S.Tensor.from_numpy(dev, np.ones((2, 3), np.float32))
    b = S.Tensor.from_numpy(dev, np.ones((2, 3), np.float64))
    for op in ["add", "matmul"]:
        if op == "matmul":
            b = S.Tensor.from_numpy(dev, np.ones((3, 2), np.float64))
        e = expect_error(INVALID, [f"[{op}]", "f32", "f64"], S.op_call, op, [a, b])
        assert "dtype" in e.message


def test_error_unsupported_dtype(dev):
    t = S.Tensor.from_numpy(dev, np.arange(6, dtype=np.int32).reshape(2, 3))
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.int32).reshape(2, 3))
    expect_error(INVALID, ["[exp]", "i32"], S.op_call, "exp", [t])
    expect_error(INVALID, ["[pow]", "i32"], S.op_call, "pow", [t, t])


def test_error_unknown_op(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2,), dt))
    expect_error(S.ERROR_NOT_FOUND, ["[frobnicate]", "unknown op"], S.op_call, "frobnicate", [t])
    expect_error(S.ERROR_NOT_FOUND, ["[frobnicate]"], S.op_schema, "frobnicate")
    expect_error(S.ERROR_NOT_FOUND, ["[]"], S.op_call, "", [t])


def test_error_unknown_attribute(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[softmax]", "unknown attribute 'axes'", "axis"], S.op_call, "softmax", [t],
                 {"axes": [0]})
    expect_error(INVALID, ["[neg]", "unknown attribute 'alpha'"], S.op_call, "neg", [t], {"alpha": 1.0})
    expect_error(INVALID, ["[sum]", "unknown attribute 'axis'"], S.op_call, "sum", [t], {"axis": 0})


def test_error_attribute_of_wrong_type(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    cases = [
        ("softmax", {"axis": [0, 1]}, "'axis'"),
        ("softmax", {"axis": "last"}, "'axis'"),
        ("softmax", {"axis": 0.5}, "'axis'"),
        ("sum", {"axes": "0"}, "'axes'"),
        ("sum", {"axes": [0.5]}, "'axes'"),
        ("sum", {"keepdims": 2}, "'keepdims'"),
        ("sum", {"keepdims": "yes"}, "'keepdims'"),
        ("transpose", {"perm": 1.0}, "'perm'"),
        ("reshape", {"shape": "6"}, "'shape'"),
    ]
    for op, attrs, name in cases:
        expect_error(INVALID, [f"[{op}]", name], S.op_call, op, [t], attrs)
    u = S.Tensor.from_numpy(dev, np.ones((3, 2), dt))
    expect_error(INVALID, ["[matmul]", "'transpose_a'"], S.op_call, "matmul", [t, u], {"transpose_a": 0.0})
    expect_error(INVALID, ["[matmul]", "'transpose_b'"], S.op_call, "matmul", [t, u], {"transpose_b": "no"})


def test_error_required_attribute_missing(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[reshape]", "'shape'", "required"], S.op_call, "reshape", [t])


def test_error_axis_out_of_range(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    for op, attrs in [("softmax", {"axis": 2}), ("softmax", {"axis": -3}), ("sum", {"axes": [2]}),
                      ("mean", {"axes": [0, -3]}), ("transpose", {"perm": [0, 2]})]:
        expect_error(INVALID, [f"[{op}]", "out of range"], S.op_call, op, [t], attrs)
    s = S.Tensor.from_numpy(dev, np.ones((), dt))
    expect_error(INVALID, ["[softmax]", "out of range"], S.op_call, "softmax", [s], {"axis": 1})


def test_error_repeated_axes(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[sum]", "twice"], S.op_call, "sum", [t], {"axes": [0, -2]})
    expect_error(INVALID, ["[transpose]", "twice"], S.op_call, "transpose", [t], {"perm": [1, 1]})
    expect_error(INVALID, ["[transpose]", "entries"], S.op_call, "transpose", [t], {"perm": [1, 0, 2]})


def test_error_bad_reshape(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[reshape]"], S.op_call, "reshape", [t], {"shape": [4, 2]})
    expect_error(INVALID, ["[reshape]", "-1"], S.op_call, "reshape", [t], {"shape": [-1, -1]})
    expect_error(INVALID, ["[reshape]"], S.op_call, "reshape", [t], {"shape": [4, -1]})
    expect_error(INVALID, ["[reshape]", "negative"], S.op_call, "reshape", [t], {"shape": [-2, -3]})
    expect_error(INVALID, ["[reshape]"], S.op_call, "reshape", [t], {"shape": [0, -1]})
    expect_error(INVALID, ["[reshape]"], S.op_call, "reshape", [t], {"shape": [1] * 9})


def test_error_mean_over_zero_size(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((0, 3), dt))
    expect_error(INVALID, ["[mean]", "size 0"], S.op_call, "mean", [t])
    expect_error(INVALID, ["[mean]", "size 0"], S.op_call, "mean", [t], {"axes": [0]})


def test_error_null_tensor_in_inputs(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[add]", "null"], S.op_call, "add", [t, None])
    expect_error(INVALID, ["[add]", "null"], S.op_call, "add", [None, t])
    expect_error(INVALID, ["[neg]", "null"], S.op_call, "neg", [None])
    expect_error(INVALID, ["[matmul]", "null"], S.op_call, "matmul", [None, None])


def test_error_wrong_input_count(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[add]", "2 input"], S.op_call, "add", [t])
    expect_error(INVALID, ["[add]", "2 input"], S.op_call, "add", [t, t, t])
    expect_error(INVALID, ["[neg]", "1 input"], S.op_call, "neg", [t, t])
    expect_error(INVALID, ["[add]", "2 input"], S.op_call, "add", [], device=dev)
    expect_error(INVALID, ["[add]", "device"], S.op_call, "add", [])
    expect_error(INVALID, ["[add]", "2 input"], S.op_call, "add", [t] * 17)
    expect_error(INVALID, ["[add]", "takes at most 64"], S.op_call, "add", [t] * 65)


def test_error_wrong_output_count(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    expect_error(INVALID, ["[add]", "output"], S.op_call, "add", [t, t], num_outputs=2)
    expect_error(INVALID, ["[add]", "output"], S.op_call, "add", [t, t], num_outputs=0)
    expect_error(INVALID, ["[reshape]", "output"], S.op_call, "reshape", [t], {"shape": [6]}, num_outputs=0)
    expect_error(INVALID, ["[sum]", "output"], S.op_call, "sum", [t], num_outputs=3)
    expect_error(INVALID, ["[sum]"], S.op_call, "sum", [t], num_outputs=5)


@pytest.mark.skipif(len(DEVICES) < 2, reason="needs two devices")
def test_error_inputs_on_different_devices(dt):
    d0, d1 = CTX.device_find(DEVICES[0]), CTX.device_find(DEVICES[1])
    a = S.Tensor.from_numpy(d0, np.ones((2, 3), dt))
    b = S.Tensor.from_numpy(d1, np.ones((2, 3), dt))
    expect_error(INVALID, ["[add]", DEVICES[0], DEVICES[1]], S.op_call, "add", [a, b])
    expect_error(INVALID, ["[add]", DEVICES[0], DEVICES[1]], S.op_call, "add", [b, a])
    c = S.Tensor.from_numpy(d1, np.ones((3, 2), dt))
    expect_error(INVALID, ["[matmul]", DEVICES[0], DEVICES[1]], S.op_call, "matmul", [a, c])
    # The device argument must match the inputs' device.
    expect_error(INVALID, ["[neg]", DEVICES[0], DEVICES[1]], S.op_call, "neg", [a], device=d1)


def test_error_unknown_device():
    expect_error(S.ERROR_NOT_FOUND, ["nosuch"], CTX.device_find, "nosuch")
    expect_error(S.ERROR_NOT_FOUND, ["nosuch"], CTX.device_find, "nosuch:0")
    expect_error(S.ERROR_NOT_FOUND, [], CTX.device_find, DEVICES[0].split(":")[0] + ":99")
    expect_error(INVALID, [], CTX.device_find, "cpu:x")
    expect_error(INVALID, [], CTX.device_get, 10_000)


def test_error_tensor_create_bad_arguments(dev):
    a = np.ones((2, 3), np.float32)
    expect_error(INVALID, ["24 bytes", "20"], S.Tensor.create_raw, dev, S.DTYPE_F32, (2, 3), a, 20)
    expect_error(INVALID, ["24 bytes", "28"], S.Tensor.create_raw, dev, S.DTYPE_F32, (2, 3), a, 28)
    expect_error(INVALID, ["48 bytes"], S.Tensor.create_raw, dev, S.DTYPE_F64, (2, 3), a, a.nbytes)
    expect_error(INVALID, ["negative"], S.Tensor.create_raw, dev, S.DTYPE_F32, (2, -3), a, 24)
    expect_error(INVALID, ["rank"], S.Tensor.create_raw, dev, S.DTYPE_F32, (1,) * 9, a[0, :1], 4)
    expect_error(INVALID, ["dtype"], S.Tensor.create_raw, dev, 99, (2, 3), a, 24)
    expect_error(INVALID, ["dtype"], S.Tensor.create_raw, dev, 0, (2, 3), a, 24)
    expect_error(INVALID, [], S.Tensor.create_raw, dev, S.DTYPE_F32, (1 << 62, 1 << 3), None, 0)


def test_error_tensor_read_too_small(dev, dt):
    t = S.Tensor.from_numpy(dev, np.ones((2, 3), dt))
    buf = np.empty(5, dt)
    status = S.lib.spora_tensor_read(t.handle, buf.ctypes.data_as(S._vp), buf.nbytes)
    assert status == INVALID, S.last_error()
    assert "bytes" in S.last_error()


def test_library_still_works_after_errors(dev, dt):
    t = S.Tensor.from_numpy(dev, np.arange(6, dtype=dt).reshape(2, 3))
    for _ in range(3):
        with pytest.raises(S.SporaError):
            S.op_call("add", [t, None])
    (y,) = S.op_call("sum", [t])
    assert float(y.numpy()) == 15.0
