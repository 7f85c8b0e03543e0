"""spora.Tensor: creation and conversion per dtype, operators with
broadcasting and Python scalars, methods -- against NumPy."""
import numpy as np
import pytest

import spora

RNG = np.random.default_rng(0)

NP_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]


@pytest.mark.parametrize("npd", NP_DTYPES)
def test_roundtrip_per_dtype(npd):
    a = (RNG.standard_normal((3, 4)) * 10).astype(npd)
    t = spora.Tensor(a)
    assert t.shape == (3, 4) and t.ndim == 2 and t.size == 12
    assert t.dtype == np.dtype(npd) and t.dtype.name == np.dtype(npd).name
    assert t.device == "cpu"
    out = t.asnumpy()
    assert out.dtype == np.dtype(npd)
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(np.asarray(t), a)


def test_bfloat16_is_float32_on_the_host():
    a = np.array([1.0, 2.5, -3.0, 1e-3], np.float32)
    t = spora.Tensor(a, dtype=spora.bfloat16)
    assert t.dtype == spora.bfloat16 and t.dtype.numpy is None
    np.testing.assert_allclose(t.asnumpy(), a, rtol=1e-2)
    assert t.asnumpy().dtype == np.float32


def test_from_lists_scalars_and_defaults():
    assert spora.Tensor([[1.0, 2.0]]).dtype == spora.float32  # Python floats: float32
    assert spora.Tensor([1, 2, 3]).dtype == spora.int64
    assert spora.Tensor(True).dtype == spora.bool_
    s = spora.Tensor(2.5)
    assert s.shape == () and s.item() == 2.5 and float(s) == 2.5
    assert spora.Tensor(np.float64(1.5)).dtype == spora.float64  # NumPy keeps its dtype
    t = spora.Tensor([1, 2], dtype=spora.float64)
    assert t.dtype == np.float64
    assert spora.Tensor([1, 2], dtype="float16").dtype == spora.float16
    assert spora.Tensor([1, 2], dtype=np.int32).dtype == spora.int32
    c = spora.Tensor(t)  # from a Tensor: same value
    np.testing.assert_array_equal(c.asnumpy(), [1.0, 2.0])


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match="int16 is not supported"):
        spora.Tensor(np.zeros(3, np.int16))
    with pytest.raises(TypeError, match="complex128"):
        spora.Tensor(np.zeros(3, np.complex128))
    with pytest.raises(TypeError, match="ragged"):
        spora.Tensor([[1, 2], [3]])


def test_dtype_objects():
    assert spora.float32 == np.float32 and spora.float32 == "float32" and spora.float32 != spora.float64
    assert spora.int64 == np.dtype("int64")
    assert repr(spora.uint8) == "spora.uint8"
    assert {spora.float32: 1}[spora.float32] == 1


def test_astype_and_item_len_bool():
    t = spora.Tensor(np.array([1.7, -2.2, 0.0], np.float32))
    np.testing.assert_array_equal(t.astype(spora.int32).asnumpy(), np.array([1.7, -2.2, 0.0]).astype(np.int32))
    assert t.astype("float64").dtype == np.float64
    assert len(t) == 3
    assert bool(spora.Tensor([1.0])) is True
    with pytest.raises(ValueError, match="one element"):
        bool(t)
    with pytest.raises(ValueError, match="one element"):
        t.item()
    assert int(spora.Tensor(7)) == 7


def test_repr_shows_values():
    r = repr(spora.Tensor([[1.0, 2.0]]))
    assert "shape=[1, 2]" in r and "float32" in r and "1., 2." in r


BIN = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b),
    ("pow", lambda a, b: a ** b),
    ("eq", lambda a, b: a == b),
    ("ne", lambda a, b: a != b),
    ("lt", lambda a, b: a < b),
    ("le", lambda a, b: a <= b),
    ("gt", lambda a, b: a > b),
    ("ge", lambda a, b: a >= b),
]


@pytest.mark.parametrize("name,f", BIN)
def test_binary_operators_broadcast(name, f):
    a = RNG.uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)
    b = RNG.uniform(0.5, 2.0, (3, 1)).astype(np.float32)
    if name in ("eq", "ne"):
        b[0, 0] = a[0, 0, 0]
    got = f(spora.Tensor(a), spora.Tensor(b)).asnumpy()
    want = f(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("name,f", BIN[:5])
def test_python_scalars_both_sides(name, f):
    a = RNG.uniform(0.5, 2.0, (4,)).astype(np.float32)
    t = spora.Tensor(a)
    r = f(t, 2.0)
    assert r.dtype == spora.float32  # the scalar takes the tensor's dtype
    np.testing.assert_allclose(r.asnumpy(), f(a, np.float32(2.0)), rtol=1e-5)
    np.testing.assert_allclose(f(3, t).asnumpy(), f(np.float32(3), a), rtol=1e-5)


def test_numpy_array_operands_and_reflected():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = spora.Tensor(a)
    r = a + t  # numpy defers to Tensor
    assert isinstance(r, spora.Tensor)
    np.testing.assert_array_equal(r.asnumpy(), a + a)
    np.testing.assert_array_equal((t * [1.0, 2.0, 3.0]).asnumpy(), a * [1, 2, 3])


def test_integer_arithmetic_and_promotion():
    a = np.array([7, -7, 5, 0], np.int32)
    b = np.array([2, 2, -3, 4], np.int32)
    ta, tb = spora.Tensor(a), spora.Tensor(b)
    np.testing.assert_array_equal((ta + tb).asnumpy(), a + b)
    assert (ta + tb).dtype == spora.int32
    np.testing.assert_allclose((ta / tb).asnumpy(), (a / b).astype(np.float32))  # true division
    np.testing.assert_array_equal((ta // tb).asnumpy(), a // b)
    np.testing.assert_array_equal((ta % tb).asnumpy(), a % b)
    np.testing.assert_array_equal((ta ** 2).asnumpy(), a ** 2)
    assert (ta * 1.5).dtype == spora.float32  # a float scalar promotes ints
    np.testing.assert_allclose((ta * 1.5).asnumpy(), a * 1.5)
    f64 = spora.Tensor(np.ones(4))
    assert (ta + f64).dtype == spora.float64
    h = spora.Tensor(np.ones(4, np.float16))
    assert (h + spora.Tensor(np.ones(4, np.float32))).dtype == spora.float32


def test_float_floordiv_mod_match_python():
    a = np.array([7.5, -7.5, 5.0, -0.5], np.float32)
    b = np.array([2.0, 2.0, -3.0, 4.0], np.float32)
    ta, tb = spora.Tensor(a), spora.Tensor(b)
    np.testing.assert_allclose((ta // tb).asnumpy(), a // b)
    np.testing.assert_allclose((ta % tb).asnumpy(), np.mod(a, b), rtol=1e-6)
    np.testing.assert_allclose((10.0 % ta).asnumpy(), np.mod(np.float32(10), a), rtol=1e-6)


def test_unary_and_logical():
    a = np.array([-1.5, 0.0, 2.0], np.float32)
    t = spora.Tensor(a)
    np.testing.assert_array_equal((-t).asnumpy(), -a)
    np.testing.assert_array_equal(abs(t).asnumpy(), np.abs(a))
    m = t > 0
    n = t < 1
    np.testing.assert_array_equal((m & n).asnumpy(), (a > 0) & (a < 1))
    np.testing.assert_array_equal((m | n).asnumpy(), (a > 0) | (a < 1))
    np.testing.assert_array_equal((m ^ n).asnumpy(), (a > 0) ^ (a < 1))
    np.testing.assert_array_equal((~m).asnumpy(), ~(a > 0))
    with pytest.raises(TypeError, match="bool"):
        t & t


def test_matmul_operator_and_method():
    a = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    b = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose((spora.Tensor(a) @ spora.Tensor(b)).asnumpy(), a @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(spora.Tensor(a).matmul(b).asnumpy(), a @ b, rtol=1e-5, atol=1e-6)


METHODS = [
    ("sum", lambda x: x.sum(), lambda a: a.sum()),
    ("sum1", lambda x: x.sum(axis=1), lambda a: a.sum(axis=1)),
    ("sum_keep", lambda x: x.sum(axis=(0, 2), keepdims=True), lambda a: a.sum(axis=(0, 2), keepdims=True)),
    ("mean", lambda x: x.mean(axis=-1), lambda a: a.mean(axis=-1)),
    ("max", lambda x: x.max(), lambda a: a.max()),
    ("min0", lambda x: x.min(axis=0), lambda a: a.min(axis=0)),
    ("argmax", lambda x: x.argmax(), lambda a: a.argmax()),
    ("argmin1", lambda x: x.argmin(axis=1), lambda a: a.argmin(axis=1)),
    ("prod", lambda x: x.prod(axis=2), lambda a: a.prod(axis=2)),
    ("var", lambda x: x.var(axis=1), lambda a: a.var(axis=1)),
    ("std", lambda x: x.std(), lambda a: a.std()),
    ("reshape", lambda x: x.reshape(4, -1), lambda a: a.reshape(4, -1)),
    ("view", lambda x: x.view((6, 4)), lambda a: a.reshape(6, 4)),
    ("transpose", lambda x: x.transpose(), lambda a: a.transpose()),
    ("transpose_axes", lambda x: x.transpose(1, 0, 2), lambda a: a.transpose(1, 0, 2)),
    ("permute", lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("T", lambda x: x.T, lambda a: a.T),
    ("swapaxes", lambda x: x.swapaxes(0, 2), lambda a: a.swapaxes(0, 2)),
    ("flatten", lambda x: x.flatten(), lambda a: a.flatten()),
    ("flatten1", lambda x: x.flatten(1), lambda a: a.reshape(2, -1)),
    ("unsqueeze", lambda x: x.unsqueeze(1), lambda a: np.expand_dims(a, 1)),
    ("expand_dims", lambda x: x.expand_dims(-1), lambda a: np.expand_dims(a, -1)),
    ("squeeze", lambda x: x.reshape(1, 2, 1, 12).squeeze(), lambda a: a.reshape(2, 12)),
    ("squeeze_axis", lambda x: x.reshape(1, 2, 1, 12).squeeze(2), lambda a: a.reshape(1, 2, 12)),
    ("exp", lambda x: x.exp(), np.exp),
    ("log", lambda x: abs(x).log(), lambda a: np.log(np.abs(a))),
    ("sqrt", lambda x: abs(x).sqrt(), lambda a: np.sqrt(np.abs(a))),
    ("abs", lambda x: x.abs(), np.abs),
    ("relu", lambda x: x.relu(), lambda a: np.maximum(a, 0)),
    ("sigmoid", lambda x: x.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    ("tanh", lambda x: x.tanh(), np.tanh),
    ("softmax", lambda x: x.softmax(), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
    ("log_softmax", lambda x: x.log_softmax(axis=1),
     lambda a: a - np.log(np.exp(a).sum(1, keepdims=True))),
    ("clip", lambda x: x.clip(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
    ("clip_min", lambda x: x.clip(min=0), lambda a: np.clip(a, 0, None)),
    ("cumsum", lambda x: x.cumsum(axis=1), lambda a: np.cumsum(a, axis=1)),
    ("flip", lambda x: x.flip(0), lambda a: np.flip(a, 0)),
    ("tile", lambda x: x.tile(1, 2, 1), lambda a: np.tile(a, (1, 2, 1))),
    ("broadcast_to", lambda x: x[:, :1].broadcast_to(2, 5, 4), lambda a: np.broadcast_to(a[:, :1], (2, 5, 4))),
    ("maximum", lambda x: x.maximum(0.1), lambda a: np.maximum(a, 0.1)),
    ("pow", lambda x: abs(x).pow(1.5), lambda a: np.abs(a) ** 1.5),
    ("logsumexp", lambda x: x.logsumexp(axis=2), lambda a: np.log(np.exp(a).sum(2))),
]


@pytest.mark.parametrize("name,f,g", METHODS, ids=[m[0] for m in METHODS])
def test_methods_vs_numpy(name, f, g):
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    got = f(spora.Tensor(a))
    want = np.asarray(g(a))
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_integer_reductions():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = spora.Tensor(a)
    np.testing.assert_array_equal(t.sum(axis=0).asnumpy(), a.sum(axis=0))
    assert t.mean().item() == pytest.approx(a.mean())
    b = spora.Tensor(np.array([True, False, True]))
    assert b.sum().item() == 2 and b.any().item() and not b.all().item()


def test_to_device_and_back():
    a = RNG.standard_normal((3, 3)).astype(np.float32)
    t = spora.Tensor(a)
    s = t.to("sim:0")
    assert s.device == "sim:0"
    r = (s * 2 + 1).relu()
    assert r.device == "sim:0"
    np.testing.assert_allclose(r.to("cpu").asnumpy(), np.maximum(a * 2 + 1, 0), rtol=1e-6)
    np.testing.assert_allclose(r.asnumpy(), np.maximum(a * 2 + 1, 0), rtol=1e-6)
    assert t.to("cpu") is t
    u = spora.Tensor(a, device="sim:0")
    assert u.device == "sim:0"


def test_set_device_changes_default():
    spora.set_device("sim:0")
    assert spora.Tensor([1.0]).device == "sim:0"
    assert spora.ops.zeros((2,)).device == "sim:0"
    spora.set_device("cpu")
    assert spora.Tensor([1.0]).device == "cpu"


def test_tensor_is_hashable_and_iterable():
    t = spora.Tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    assert {t: 1}[t] == 1
    rows = [r.asnumpy() for r in t]
    np.testing.assert_array_equal(np.stack(rows), np.arange(6).reshape(3, 2))


def test_vs_torch_when_installed():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((4, 5)).astype(np.float32)
    b = RNG.standard_normal((5, 3)).astype(np.float32)
    t = (spora.Tensor(a) @ spora.Tensor(b)).softmax(axis=1).asnumpy()
    w = torch.softmax(torch.from_numpy(a) @ torch.from_numpy(b), dim=1).numpy()
    np.testing.assert_allclose(t, w, rtol=1e-5, atol=1e-6)


def test_pickle_and_deepcopy():
    import copy
    import pickle
    t = spora.Tensor(np.arange(4, dtype=np.float32), dtype=spora.bfloat16)
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == spora.bfloat16 and u.device == t.device
    np.testing.assert_array_equal(u.asnumpy(), t.asnumpy())
    p = spora.Parameter(np.ones(3), name="w", requires_grad=False)
    q = copy.deepcopy(p)
    assert isinstance(q, spora.Parameter) and q.name == "w" and not q.requires_grad and q is not p
    q.assign_value(2.0)
    np.testing.assert_array_equal(p.asnumpy(), np.ones(3))
