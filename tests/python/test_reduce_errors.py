"""Reductions, cumsum and topk: bad input gives an error status and a message
naming the op, never a crash; and the edge semantics the differential
harness cannot reach with random inputs (NaN, infinities, wrap-around,
ties), checked on every device."""
import numpy as np
import pytest

import spora_capi as S

INVALID = S.ERROR_INVALID_ARGUMENT
CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]

REDUCTIONS = ["sum", "mean", "max", "min", "prod", "logsumexp", "var", "std"]
ARGS = ["argmax", "argmin"]


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def expect_error(fragments, fn, *args, status=INVALID, **kwargs):
    with pytest.raises(S.SporaError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.status == status, f"status {err.status}, want {status}: {err.message}"
    for f in fragments:
        assert f in err.message, f"{f!r} not in {err.message!r}"
    return err


def call(op, x, attrs=None, n=1):
    return S.op_call(op, [x], attrs, num_outputs=n)


def tensor(dev, a):
    return S.Tensor.from_numpy(dev, np.asarray(a))


# -- dtypes ----------------------------------------------------------------

@pytest.mark.parametrize("op,dtype", [
    ("mean", np.int32), ("var", np.int64), ("std", np.int32), ("logsumexp", np.int64), ("mean", np.uint8),
    ("sum", np.uint8), ("prod", np.uint8), ("sum", np.bool_), ("max", np.bool_), ("argmax", np.bool_),
    ("argmin", np.bool_), ("cumsum", np.uint8), ("cumsum", np.bool_), ("topk", np.bool_),
])
def test_unsupported_dtype(dev, op, dtype):
    x = tensor(dev, np.ones((2, 3), dtype))
    attrs = {"k": 1} if op == "topk" else None
    expect_error([f"[{op}]", "dtype", "not support"], call, op, x, attrs, 2 if op == "topk" else 1)


# -- axes ------------------------------------------------------------------

@pytest.mark.parametrize("op", REDUCTIONS)
def test_axes_out_of_range_or_repeated(dev, op):
    x = tensor(dev, np.ones((2, 3), np.float32))
    expect_error([f"[{op}]", "axis 2", "out of range"], call, op, x, {"axes": [2]})
    expect_error([f"[{op}]", "axis -3", "out of range"], call, op, x, {"axes": [0, -3]})
    expect_error([f"[{op}]", "twice"], call, op, x, {"axes": [1, -1]})


@pytest.mark.parametrize("op,attrs,n", [
    ("argmax", {"axis": 2}, 1), ("argmin", {"axis": -3}, 1), ("cumsum", {"axis": 2}, 1),
    ("cumsum", {"axis": -3}, 1), ("topk", {"k": 1, "axis": 2}, 2), ("topk", {"k": 1, "axis": -3}, 2),
])
def test_axis_out_of_range(dev, op, attrs, n):
    x = tensor(dev, np.ones((2, 3), np.float32))
    expect_error([f"[{op}]", "out of range"], call, op, x, attrs, n)


def test_scalar_axes(dev):
    # A scalar accepts axis 0 and -1 (like numpy) and nothing else.
    x = tensor(dev, np.float32(3))
    assert call("sum", x, {"axes": [0]})[0].numpy() == 3
    assert call("argmax", x, {"axis": -1})[0].numpy() == 0
    assert call("cumsum", x, {"axis": 0})[0].numpy() == 3
    expect_error(["[max]", "out of range"], call, "max", x, {"axes": [1]})
    expect_error(["[topk]", "out of range"], call, "topk", x, {"k": 1, "axis": 1}, 2)


# -- empty reductions ------------------------------------------------------

@pytest.mark.parametrize("op", ["max", "min", "mean", "var", "std"])
def test_reduction_over_nothing(dev, op):
    x = tensor(dev, np.ones((0, 3), np.float32))
    expect_error([f"[{op}]", "size 0"], call, op, x)
    expect_error([f"[{op}]", "size 0", "(0,3)"], call, op, x, {"axes": [0]})
    # A zero-size dim that is kept is fine: the result is empty.
    assert call(op, x, {"axes": [1]})[0].shape == (0,)


@pytest.mark.parametrize("op", ["max", "min"])
def test_integer_max_over_nothing(dev, op):
    x = tensor(dev, np.ones((3, 0), np.int32))
    expect_error([f"[{op}]", "size 0"], call, op, x, {"axes": [1]})


def test_identities_of_empty_reductions(dev):
    x = tensor(dev, np.ones((0, 3), np.float64))
    np.testing.assert_array_equal(call("sum", x, {"axes": [0]})[0].numpy(), [0, 0, 0])
    np.testing.assert_array_equal(call("prod", x, {"axes": [0]})[0].numpy(), [1, 1, 1])
    np.testing.assert_array_equal(call("logsumexp", x, {"axes": [0]})[0].numpy(), [-np.inf] * 3)
    xi = tensor(dev, np.ones((0, 3), np.int64))
    np.testing.assert_array_equal(call("prod", xi)[0].numpy(), 1)


@pytest.mark.parametrize("op", ARGS)
def test_arg_of_empty(dev, op):
    x = tensor(dev, np.ones((0, 3), np.float32))
    expect_error([f"[{op}]", "empty", "(0,3)"], call, op, x)
    expect_error([f"[{op}]", "size 0"], call, op, x, {"axis": 0})
    assert call(op, x, {"axis": 1})[0].shape == (0,)


# -- topk's k ----------------------------------------------------------------

def test_topk_k(dev):
    x = tensor(dev, np.ones((2, 5), np.float32))
    expect_error(["[topk]", "'k'", "required"], call, "topk", x, None, 2)
    expect_error(["[topk]", "k=-1", "out of range"], call, "topk", x, {"k": -1}, 2)
    expect_error(["[topk]", "k=6", "size 5"], call, "topk", x, {"k": 6}, 2)
    expect_error(["[topk]", "k=3", "size 2"], call, "topk", x, {"k": 3, "axis": 0}, 2)
    expect_error(["[topk]", "2 output"], call, "topk", x, {"k": 1}, 1)
    s = tensor(dev, np.float32(1))
    expect_error(["[topk]", "scalar"], call, "topk", s, {"k": 0}, 2)
    expect_error(["[topk]", "k=2"], call, "topk", s, {"k": 2}, 2)
    v, i = call("topk", s, {"k": 1}, 2)
    assert v.shape == () and i.numpy() == 0


# -- attribute types and names ----------------------------------------------

@pytest.mark.parametrize("op,attrs,fragment", [
    ("max", {"axes": "0"}, "'axes'"), ("min", {"axes": [0.5]}, "'axes'"), ("prod", {"keepdims": 2}, "'keepdims'"),
    ("var", {"correction": 0.5}, "'correction'"), ("std", {"correction": "1"}, "'correction'"),
    ("argmax", {"axis": [0]}, "'axis'"), ("argmin", {"axis": 0.0}, "'axis'"),
    ("argmax", {"keepdims": "no"}, "'keepdims'"), ("cumsum", {"axis": [0]}, "'axis'"),
    ("cumsum", {"exclusive": 2}, "'exclusive'"), ("cumsum", {"reverse": "yes"}, "'reverse'"),
    ("topk", {"k": 1.5}, "'k'"), ("topk", {"k": 1, "largest": 3}, "'largest'"),
    ("topk", {"k": 1, "sorted": [1]}, "'sorted'"),
])
def test_attribute_of_wrong_type(dev, op, attrs, fragment):
    x = tensor(dev, np.ones((2, 3), np.float32))
    expect_error([f"[{op}]", fragment], call, op, x, attrs, 2 if op == "topk" else 1)


@pytest.mark.parametrize("op,attrs", [
    ("argmax", {"axes": [0]}), ("var", {"ddof": 1}), ("logsumexp", {"axis": 0}), ("cumsum", {"dim": 0}),
    ("topk", {"k": 1, "dim": 0}), ("max", {"correction": 1}),
])
def test_unknown_attribute(dev, op, attrs):
    x = tensor(dev, np.ones((2, 3), np.float32))
    expect_error([f"[{op}]", "unknown attribute"], call, op, x, attrs, 2 if op == "topk" else 1)


def test_wrong_input_count(dev):
    x = tensor(dev, np.ones((2, 3), np.float32))
    for op in REDUCTIONS + ARGS + ["cumsum"]:
        expect_error([f"[{op}]", "input"], S.op_call, op, [x, x])
    expect_error(["[topk]", "input"], S.op_call, "topk", [x, x], {"k": 1}, num_outputs=2)


# -- edge semantics on every device ---------------------------------------

NAN = np.nan


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_nan_propagates_through_max_min(dev, dtype):
    x = tensor(dev, np.array([[1, NAN, 3], [4, 5, 6], [NAN, NAN, -1]], dtype))
    for op, want in [("max", [NAN, 6, NAN]), ("min", [NAN, 4, NAN])]:
        np.testing.assert_array_equal(call(op, x, {"axes": [1]})[0].numpy(), np.array(want, dtype))
    np.testing.assert_array_equal(call("max", x, {"axes": [0]})[0].numpy(), np.array([NAN, NAN, 6], dtype))
    big = np.arange(100_000, dtype=dtype if dtype != np.float16 else np.float32)
    big[77_777] = NAN
    assert np.isnan(call("max", tensor(dev, big))[0].numpy())
    assert np.isnan(call("min", tensor(dev, big))[0].numpy())


@pytest.mark.parametrize("op", ARGS)
def test_first_nan_wins_argmax_argmin(dev, op):
    x = np.array([[1, NAN, 3, NAN], [7, 7, 2, 2], [-np.inf, 0, np.inf, np.inf]], np.float32)
    got = call(op, tensor(dev, x), {"axis": 1})[0].numpy()
    np.testing.assert_array_equal(got, getattr(np, op)(x, axis=1))
    big = np.zeros(100_003, np.float32)
    big[[5, 60_000]] = 1 if op == "argmax" else -1
    big[[90_000, 99_000]] = NAN
    assert call(op, tensor(dev, big))[0].numpy() == 90_000
    big[[90_000, 99_000]] = 0
    assert call(op, tensor(dev, big))[0].numpy() == 5


def test_topk_nan_and_ties(dev):
    x = np.array([2, NAN, 5, 5, -np.inf, NAN, 2, np.inf], np.float32)
    v, i = call("topk", tensor(dev, x), {"k": 5}, 2)
    np.testing.assert_array_equal(i.numpy(), [1, 5, 7, 2, 3])
    np.testing.assert_array_equal(v.numpy(), np.array([NAN, NAN, np.inf, 5, 5], np.float32))
    v, i = call("topk", tensor(dev, x), {"k": 5, "largest": False}, 2)
    np.testing.assert_array_equal(i.numpy(), [4, 0, 6, 2, 3])
    v, i = call("topk", tensor(dev, x), {"k": 4, "sorted": False}, 2)
    np.testing.assert_array_equal(i.numpy(), [1, 2, 5, 7])
    np.testing.assert_array_equal(v.numpy(), np.array([NAN, 5, NAN, np.inf], np.float32))


def test_integer_sums_wrap(dev):
    big = np.iinfo(np.int32).max
    x = np.array([big, 1, big, 5], np.int32)
    assert call("sum", tensor(dev, x))[0].numpy() == np.int32(np.int64(2 * big + 6).astype(np.int32))
    want = np.cumsum(x.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(call("cumsum", tensor(dev, x))[0].numpy(), want)
    x64 = np.array([np.iinfo(np.int64).max, 2], np.int64)
    assert call("sum", tensor(dev, x64))[0].numpy() == np.iinfo(np.int64).min + 1
    assert call("prod", tensor(dev, x64))[0].numpy() == -2


def test_logsumexp_infinities(dev):
    x = np.array([[-np.inf, -np.inf], [np.inf, 1], [NAN, 1], [1000, 1000]], np.float64)
    got = call("logsumexp", tensor(dev, x), {"axes": [1]})[0].numpy()
    np.testing.assert_allclose(got, [-np.inf, np.inf, NAN, 1000 + np.log(2)], rtol=1e-15)


def test_var_correction_at_least_n(dev):
    x = tensor(dev, np.array([[1.0, 2.0], [3.0, 3.0]], np.float64))
    np.testing.assert_array_equal(call("var", x, {"axes": [1], "correction": 2})[0].numpy(), [np.inf, NAN])
    np.testing.assert_array_equal(call("std", x, {"axes": [1], "correction": 5})[0].numpy(), [np.inf, NAN])
    np.testing.assert_allclose(call("var", x, {"axes": [1], "correction": -1})[0].numpy(), [0.5 / 3, 0])


def test_var_of_large_offset_data_is_accurate(dev):
    # Two passes (mean, then squared deviations) lose nothing to cancellation.
    rng = np.random.default_rng(3)
    x = (1e4 + rng.standard_normal(1_000_003)).astype(np.float32)
    got = float(call("var", tensor(dev, x))[0].numpy())
    assert abs(got - x.astype(np.float64).var()) < 1e-5


# -- normalised attributes infer again to the same call -----------------------

@pytest.mark.parametrize("op,attrs,n", [
    ("sum", {"axes": [-1, 0], "keepdims": True}, 1), ("max", None, 1), ("var", {"axes": [1], "correction": 1}, 1),
    ("logsumexp", {"axes": -2}, 1), ("argmax", None, 1), ("argmin", {"axis": -1, "keepdims": True}, 1),
    ("argmax", {"keepdims": True}, 1), ("cumsum", {"axis": -3, "reverse": True}, 1),
    ("topk", {"k": 2, "largest": False}, 2),
])
def test_graph_json_round_trip(op, attrs, n):
    # A graph keeps the attributes inference normalised; loading it infers
    # again from them, which must accept them and give the same result.
    cpu = CTX.device_find("cpu")
    x = np.random.default_rng(5).standard_normal((2, 1, 3))
    g = S.Graph(op)
    v = g.input("x", S.DTYPE_F64, [2, 1, 3])
    g.set_outputs(g.op(op, [v], attrs))
    back = S.Graph.from_json(g.json())
    xs = [S.Tensor.from_numpy(cpu, x)]
    for a, b in zip(g.compile(cpu).run(xs, n), back.compile(cpu).run(xs, n)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
