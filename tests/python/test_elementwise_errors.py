"""Bad input to the elementwise family (unary, binary, comparisons, logical
ops, where, cast) on every device: an error status and a message that names
the op, never a crash. Also the specified results for awkward values (NaN,
overflow, out-of-range casts) that the differential harness cannot generate.
"""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
INVALID = S.ERROR_INVALID_ARGUMENT


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def t(dev, a):
    return S.Tensor.from_numpy(dev, np.asarray(a))


def expect_error(fragments, op, inputs, attrs=None, num_outputs=1, status=INVALID):
    with pytest.raises(S.SporaError) as info:
        S.op_call(op, inputs, attrs, num_outputs=num_outputs)
    e = info.value
    assert e.status == status, f"status {e.status} ({S.status_string(e.status)}), want {status}: {e.message}"
    assert f"[{op}]" in e.message, f"message does not name [{op}]: {e.message!r}"
    for f in fragments:
        assert f in e.message, f"{f!r} not in error message {e.message!r}"
    return e


def run(op, *inputs, **attrs):
    return S.op_call(op, list(inputs), attrs or None)[0].numpy()


# -- dtypes ------------------------------------------------------------------

def test_integer_division_is_refused_with_the_fix(dev):
    for dt in (np.int32, np.int64, np.uint8):
        a = t(dev, np.arange(1, 7, dtype=dt))
        expect_error(["integer division", "cast"], "div", [a, a])


@pytest.mark.parametrize("op,dtype", [
    ("exp", np.int32), ("sqrt", np.int64), ("floor", np.uint8), ("gelu", np.int32), ("pow", np.int32),
    ("neg", np.uint8), ("neg", np.bool_), ("abs", np.bool_), ("add", np.bool_), ("maximum", np.bool_),
    ("less", np.bool_), ("logical_and", np.float32), ("logical_xor", np.int32), ("logical_not", np.float32),
    ("clip", np.bool_), ("round", np.int32),
])
def test_unsupported_dtype(dev, op, dtype):
    a = t(dev, np.ones((2, 3), dtype))
    n = {"pow": 2, "add": 2, "maximum": 2, "less": 2, "logical_and": 2, "logical_xor": 2}.get(op, 1)
    name = {np.int32: "i32", np.int64: "i64", np.uint8: "u8", np.bool_: "bool", np.float32: "f32"}[dtype]
    expect_error([name, "does not support"], op, [a] * n)


def test_mixed_dtypes(dev):
    a, b = t(dev, np.ones(3, np.float32)), t(dev, np.ones(3, np.float64))
    for op in ("add", "maximum", "equal", "pow"):
        expect_error(["different dtypes", "cast"], op, [a, b])
    c = t(dev, np.ones(3, np.bool_))
    expect_error(["different dtypes"], "where", [c, a, b])


def test_where_needs_a_bool_condition(dev):
    x = t(dev, np.ones(3, np.float32))
    for cond in (np.ones(3, np.float32), np.ones(3, np.uint8), np.ones(3, np.int64)):
        expect_error(["cond must be bool"], "where", [t(dev, cond), x, x])


# -- shapes ------------------------------------------------------------------

@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "less", "not_equal"])
def test_shapes_that_do_not_broadcast(dev, op):
    a, b = t(dev, np.ones((2, 3), np.float32)), t(dev, np.ones((4,), np.float32))
    expect_error(["(2,3)", "(4,)", "do not broadcast"], op, [a, b])
    a, b = t(dev, np.ones((5, 1, 3), np.float32)), t(dev, np.ones((2, 2), np.float32))
    expect_error(["do not broadcast"], op, [a, b])


def test_logical_shapes_that_do_not_broadcast(dev):
    a, b = t(dev, np.ones((3,), np.bool_)), t(dev, np.ones((2,), np.bool_))
    expect_error(["do not broadcast"], "logical_or", [a, b])


def test_where_shapes_that_do_not_broadcast(dev):
    c = t(dev, np.ones((2, 3), np.bool_))
    x, y = t(dev, np.ones((3,), np.float32)), t(dev, np.ones((4, 1, 1), np.float32))
    S.op_call("where", [c, x, y])  # (2,3), (3,), (4,1,1) do broadcast
    expect_error(["(2,3)", "(2,)", "do not broadcast"], "where", [c, x, t(dev, np.ones((2,), np.float32))])


def test_broadcast_element_count_overflow(dev):
    # Each operand holds 2^21 bytes; their broadcast would hold 2^63 elements.
    n = 1 << 21
    c = t(dev, np.zeros((n, 1, 1), np.bool_))
    x = t(dev, np.zeros((1, n, 1), np.uint8))
    y = t(dev, np.zeros((1, 1, n), np.uint8))
    expect_error(["int64"], "where", [c, x, y])


def test_wrong_number_of_inputs(dev):
    a = t(dev, np.ones(3, np.float32))
    expect_error(["takes 2 input"], "add", [a])
    expect_error(["takes 1 input"], "exp", [a, a])
    expect_error(["takes 3 input"], "where", [t(dev, np.ones(3, np.bool_)), a])
    expect_error(["takes 1 input"], "cast", [a, a], {"dtype": "f64"})


# -- attributes --------------------------------------------------------------

@pytest.mark.parametrize("op,attrs,fragments", [
    ("leaky_relu", {"alpha": float("nan")}, ["alpha must be finite"]),
    ("leaky_relu", {"alpha": float("inf")}, ["alpha must be finite"]),
    ("leaky_relu", {"alpha": "big"}, ["'alpha' must be float", "string"]),
    ("gelu", {"approximate": "fast"}, ["approximate must be", "\"fast\""]),
    ("gelu", {"approximate": True}, ["'approximate' must be string"]),
    ("softplus", {"beta": 0.0}, ["beta must be non-zero"]),
    ("softplus", {"beta": float("inf")}, ["beta must be finite"]),
    ("softplus", {"threshold": float("nan")}, ["threshold"]),
    ("clip", {"min": 2.0, "max": 1.0}, ["min (2) is greater than max (1)"]),
    ("clip", {"min": float("nan")}, ["min and max must be numbers"]),
    ("clip", {"max": [1, 2]}, ["'max' must be float"]),
    ("cast", {}, ["'dtype'", "required"]),
    ("cast", {"dtype": "float32"}, ["dtype must be one of", "f32", "\"float32\""]),
    ("cast", {"dtype": ""}, ["dtype must be one of"]),
    ("cast", {"dtype": 1}, ["'dtype' must be string"]),
    ("relu", {"alpha": 0.1}, ["unknown attribute 'alpha'"]),
    ("exp", {"base": 2.0}, ["unknown attribute 'base'", "none"]),
    ("clip", {"lo": 0.0}, ["unknown attribute 'lo'", "min, max"]),
])
def test_bad_attributes(dev, op, attrs, fragments):
    expect_error(fragments, op, [t(dev, np.ones((2, 2), np.float32))], attrs)


def test_wrong_output_count(dev):
    a = t(dev, np.ones(3, np.float32))
    expect_error(["produces 1 output"], "add", [a, a], num_outputs=2)


# -- awkward values (specified behaviour, not errors) -------------------------

def test_nan_propagates(dev):
    nan = np.float32("nan")
    x = t(dev, np.array([nan, 1.0, nan, -2.0], np.float32))
    y = t(dev, np.array([0.0, nan, nan, 3.0], np.float32))
    for op in ("maximum", "minimum"):
        got = run(op, x, y)
        assert np.isnan(got[:3]).all() and got[3] == (3.0 if op == "maximum" else -2.0), (op, got)
    for op in ("relu", "abs", "sign", "floor", "round", "clip", "leaky_relu", "neg", "sqrt"):
        got = run(op, x)
        assert np.isnan(got[0]) and np.isnan(got[2]), (op, got)
    got = run("clip", x, min=-1.0, max=0.5)
    assert np.isnan(got[0]) and got[1] == 0.5 and got[3] == -1.0
    assert run("equal", x, x).tolist() == [False, True, False, True]
    assert run("not_equal", x, x).tolist() == [True, False, True, False]


def test_cast_of_nan_and_out_of_range_values(dev):
    x = t(dev, np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, 300.0, -1.5], np.float32))
    assert run("cast", x, dtype="i32").tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 300, -1]
    assert run("cast", x, dtype="u8").tolist() == [0, 255, 0, 255, 0, 2, 0, 255, 0]
    assert run("cast", x, dtype="i64").tolist()[:5] == [0, 2**63 - 1, -2**63, 3000000000, -3000000000]
    assert run("cast", x, dtype="bool").tolist() == [True] * 9
    big = t(dev, np.array([1e300, -1e300, 2.0**63, -2.0**63], np.float64))
    assert run("cast", big, dtype="i64").tolist() == [2**63 - 1, -2**63, 2**63 - 1, -2**63]
    assert np.isinf(run("cast", big, dtype="f32")[:2]).all()


def test_integer_arithmetic_wraps(dev):
    i32 = np.iinfo(np.int32)
    a = t(dev, np.array([i32.max, i32.min, 7], np.int32))
    one = t(dev, np.array([1], np.int32))
    assert run("add", a, one).tolist() == [i32.min, i32.min + 1, 8]
    assert run("sub", a, one).tolist() == [i32.max - 1, i32.max, 6]
    assert run("neg", a).tolist() == [-i32.max, i32.min, -7]
    assert run("abs", a).tolist() == [i32.max, i32.min, 7]
    assert run("square", t(dev, np.array([65536], np.int32))).tolist() == [0]
    u = t(dev, np.array([250, 3], np.uint8))
    assert run("add", u, t(dev, np.array([10], np.uint8))).tolist() == [4, 13]
    assert run("mul", u, u).tolist() == [(250 * 250) % 256, 9]


def test_round_halves_to_even_and_signed_zeros(dev):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.4999998, 2.0**23 + 1, -0.25], np.float32)
    np.testing.assert_array_equal(run("round", t(dev, x)), np.round(x))
    got = run("ceil", t(dev, np.array([-0.5, 0.5], np.float32)))
    assert got.tolist() == [0.0, 1.0] and np.signbit(got[0])
    x = np.array([-0.0, 0.25, -0.25, 1e30, -np.inf], np.float32)
    got = run("floor", t(dev, x))
    np.testing.assert_array_equal(got, np.floor(x))
    assert np.signbit(got[0])


def test_clip_bounds_on_integers(dev):
    a = t(dev, np.array([-5, 0, 5, 100], np.int32))
    assert run("clip", a, min=-2.5, max=4.5).tolist() == [-2, 0, 4, 4]
    assert run("clip", a, min=-1e30).tolist() == [-5, 0, 5, 100]
    u = t(dev, np.array([0, 9, 200], np.uint8))
    assert run("clip", u, min=-7.0, max=1e9).tolist() == [0, 9, 200]
