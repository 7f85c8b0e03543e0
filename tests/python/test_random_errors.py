"""Bad input to the "random" family (zeros, ones, full, arange, eye, uniform,
normal, truncated_normal, dropout): every case must fail with
SPORA_ERROR_INVALID_ARGUMENT and a message that starts with the op in
brackets, never crash, on every device; the library keeps working after."""
import math

import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
INVALID = S.ERROR_INVALID_ARGUMENT
GENERATED = ["uniform", "normal", "truncated_normal"]
CREATION = ["zeros", "ones", "full", "arange", "eye"]


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def expect_invalid(op, dev, attrs, inputs=(), outputs=1, fragments=()):
    with pytest.raises(S.SporaError) as info:
        S.op_call(op, list(inputs), attrs, num_outputs=outputs, device=dev)
    e = info.value
    assert e.status == INVALID, f"status {e.status} ({S.status_string(e.status)}): {e.message}"
    assert e.message.startswith(f"[{op}]"), e.message
    for f in fragments:
        assert f in e.message, f"{f!r} not in {e.message!r}"
    return e


def base_attrs(op):
    """Valid attributes for op, to break one at a time."""
    return {
        "zeros": {"shape": [2, 3]},
        "ones": {"shape": [2, 3]},
        "full": {"shape": [2, 3], "value": 1.0},
        "arange": {"stop": 5.0},
        "eye": {"n": 3},
        "uniform": {"shape": [4], "seed": 1},
        "normal": {"shape": [4], "seed": 1},
        "truncated_normal": {"shape": [4], "seed": 1},
    }[op]


def with_(op, **changes):
    a = dict(base_attrs(op))
    for k, v in changes.items():
        if v is None:
            a.pop(k, None)
        else:
            a[k] = v
    return a


def test_base_attrs_are_valid(dev):
    for op in CREATION + GENERATED:
        S.op_call(op, [], base_attrs(op), device=dev)


# -- no device, inputs, outputs ----------------------------------------------------

@pytest.mark.parametrize("op", CREATION + GENERATED)
def test_ops_without_inputs_need_a_device(op):
    with pytest.raises(S.SporaError) as info:
        S.op_call(op, [], base_attrs(op))
    assert info.value.status == INVALID and info.value.message.startswith(f"[{op}]"), info.value.message
    assert "device" in info.value.message


@pytest.mark.parametrize("op", CREATION + GENERATED)
def test_inputs_are_rejected(dev, op):
    t = S.Tensor.from_numpy(dev, np.ones(3, np.float32))
    expect_invalid(op, dev, base_attrs(op), inputs=[t], fragments=["input"])


@pytest.mark.parametrize("op", CREATION + GENERATED)
def test_wrong_output_count(dev, op):
    expect_invalid(op, dev, base_attrs(op), outputs=2, fragments=["output"])


# -- shapes and dtypes -------------------------------------------------------------

@pytest.mark.parametrize("op", ["zeros", "ones", "full"] + GENERATED)
def test_bad_shapes(dev, op):
    expect_invalid(op, dev, with_(op, shape=None), fragments=["'shape'", "required"])
    expect_invalid(op, dev, with_(op, shape=[2, -1]), fragments=["negative"])
    expect_invalid(op, dev, with_(op, shape=[1] * 9), fragments=["rank"])
    expect_invalid(op, dev, with_(op, shape=[2 ** 40, 2 ** 40]), fragments=["int64"])
    expect_invalid(op, dev, with_(op, shape=[2 ** 31, 2 ** 31]), fragments=["int64"])  # bytes overflow
    expect_invalid(op, dev, with_(op, shape=1.5), fragments=["'shape'"])
    expect_invalid(op, dev, with_(op, shape="2x3"), fragments=["'shape'"])


@pytest.mark.parametrize("op", CREATION + GENERATED)
def test_bad_dtype_names(dev, op):
    for bad in ["float32", "F32", "", "i16"]:
        expect_invalid(op, dev, with_(op, dtype=bad), fragments=["dtype", "f32"])
    expect_invalid(op, dev, with_(op, dtype=1), fragments=["'dtype'", "string"])


@pytest.mark.parametrize("op", GENERATED)
def test_random_ops_need_float_dtypes(dev, op):
    for bad in ["i32", "i64", "u8", "bool"]:
        expect_invalid(op, dev, with_(op, dtype=bad), fragments=[bad, "not supported"])


@pytest.mark.parametrize("op", GENERATED)
def test_seed_and_offset(dev, op):
    expect_invalid(op, dev, with_(op, seed=None), fragments=["'seed'", "required"])
    expect_invalid(op, dev, with_(op, seed=1.5), fragments=["'seed'"])
    expect_invalid(op, dev, with_(op, offset=-1), fragments=["offset", "non-negative"])
    expect_invalid(op, dev, with_(op, offset=0.5), fragments=["'offset'"])


def test_unknown_attribute(dev):
    expect_invalid("zeros", dev, with_("zeros", value=1.0), fragments=["unknown attribute 'value'"])
    expect_invalid("uniform", dev, with_("uniform", mean=1.0), fragments=["unknown attribute 'mean'"])


# -- full, arange, eye --------------------------------------------------------------

def test_full_values_must_fit_integer_dtypes(dev):
    expect_invalid("full", dev, with_("full", value=None), fragments=["'value'", "required"])
    for dtype, value, what in [("i32", 2.5, "not an integer"), ("i32", 2.0 ** 31, "out of range"),
                               ("i32", -2.0 ** 31 - 1, "out of range"), ("u8", 256, "out of range"),
                               ("u8", -1, "out of range"), ("i64", 2.0 ** 63, "out of range"),
                               ("i64", math.nan, "not an integer"), ("u8", math.inf, "not an integer")]:
        expect_invalid("full", dev, with_("full", dtype=dtype, value=value), fragments=[what, dtype])


def test_arange_bad_ranges(dev):
    expect_invalid("arange", dev, with_("arange", stop=None), fragments=["'stop'", "required"])
    expect_invalid("arange", dev, with_("arange", step=0), fragments=["step", "non-zero"])
    for k in ["start", "stop", "step"]:
        for v in [math.inf, -math.inf, math.nan]:
            expect_invalid("arange", dev, with_("arange", **{k: v}), fragments=["finite"])
    expect_invalid("arange", dev, {"start": 0, "stop": 1e30, "step": 1e-10}, fragments=["elements"])
    expect_invalid("arange", dev, with_("arange", dtype="bool"), fragments=["bool"])
    expect_invalid("arange", dev, with_("arange", dtype="i32", start=0.5), fragments=["start", "not an integer"])
    expect_invalid("arange", dev, with_("arange", dtype="i64", step=0.5), fragments=["step", "integer"])
    expect_invalid("arange", dev, {"start": 250, "stop": 260, "dtype": "u8"}, fragments=["out of range", "u8"])
    expect_invalid("arange", dev, {"start": -1, "stop": 3, "dtype": "u8"}, fragments=["start", "out of range"])
    expect_invalid("arange", dev, {"start": 2 ** 31 - 2, "stop": 2 ** 31 + 2, "dtype": "i32"},
                   fragments=["out of range"])


def test_eye_bad_sizes(dev):
    expect_invalid("eye", dev, {}, fragments=["'n'", "required"])
    expect_invalid("eye", dev, {"n": -1}, fragments=["n", "non-negative"])
    expect_invalid("eye", dev, {"n": 2, "m": -2}, fragments=["m", "non-negative"])
    expect_invalid("eye", dev, {"n": 2.5}, fragments=["'n'"])
    expect_invalid("eye", dev, {"n": 2 ** 40, "m": 2 ** 40}, fragments=["int64"])


# -- distribution parameters --------------------------------------------------------

def test_uniform_bad_bounds(dev):
    for low, high in [(1, 1), (2, 1), (math.nan, 1), (0, math.inf), (-math.inf, 0)]:
        expect_invalid("uniform", dev, with_("uniform", low=low, high=high), fragments=["low", "high"])
    expect_invalid("uniform", dev, with_("uniform", low=-1e308, high=1e308, dtype="f64"), fragments=["overflows"])
    # Bounds a dtype cannot hold.
    expect_invalid("uniform", dev, with_("uniform", high=1e5, dtype="f16"), fragments=["f16"])
    expect_invalid("uniform", dev, with_("uniform", low=-1e39, dtype="f32"), fragments=["f32"])


@pytest.mark.parametrize("op", ["normal", "truncated_normal"])
def test_normal_bad_parameters(dev, op):
    expect_invalid(op, dev, with_(op, std=-1), fragments=["std", "non-negative"])
    expect_invalid(op, dev, with_(op, std=math.nan), fragments=["std"])
    expect_invalid(op, dev, with_(op, std=math.inf), fragments=["std"])
    expect_invalid(op, dev, with_(op, mean=math.inf), fragments=["mean", "finite"])
    expect_invalid(op, dev, with_(op, mean=math.nan), fragments=["mean", "finite"])


def test_truncated_normal_bad_bounds(dev):
    op = "truncated_normal"
    for a, b in [(1, 1), (2, -2), (math.nan, 1), (0, math.nan), (math.inf, math.inf)]:
        expect_invalid(op, dev, with_(op, a=a, b=b), fragments=["a (", "less than b"])
    expect_invalid(op, dev, with_(op, a=-31, b=0), fragments=["-31", "[-30, 30]"])
    expect_invalid(op, dev, with_(op, a=0, b=40), fragments=["40", "[-30, 30]"])
    expect_invalid(op, dev, with_(op, a=0, b=1e-300), fragments=["too little"])


# -- dropout --------------------------------------------------------------------------

def test_dropout_bad_input(dev):
    x = S.Tensor.from_numpy(dev, np.ones((2, 3), np.float32))
    ok = {"p": 0.5, "seed": 1}
    for p in [-0.1, 1.5, math.nan, math.inf]:
        expect_invalid("dropout", dev, {"p": p, "seed": 1}, inputs=[x], outputs=2, fragments=["p must be in [0, 1]"])
    expect_invalid("dropout", dev, {"seed": 1}, inputs=[x], outputs=2, fragments=["'p'", "required"])
    expect_invalid("dropout", dev, {"p": 0.5}, inputs=[x], outputs=2, fragments=["'seed'", "required"])
    expect_invalid("dropout", dev, {**ok, "offset": -3}, inputs=[x], outputs=2, fragments=["offset"])
    expect_invalid("dropout", dev, {**ok, "training": 2}, inputs=[x], outputs=2, fragments=["'training'"])
    expect_invalid("dropout", dev, {**ok, "training": "yes"}, inputs=[x], outputs=2, fragments=["'training'"])
    expect_invalid("dropout", dev, ok, inputs=[x], outputs=1, fragments=["output"])
    expect_invalid("dropout", dev, ok, inputs=[x, x], outputs=2, fragments=["input"])
    expect_invalid("dropout", dev, ok, inputs=[], outputs=2, fragments=["input"])
    for arr in [np.ones(3, np.int32), np.ones(3, np.int64), np.ones(3, np.uint8), np.ones(3, bool)]:
        t = S.Tensor.from_numpy(dev, arr)
        expect_invalid("dropout", dev, ok, inputs=[t], outputs=2, fragments=["dtype", "not support"])


def test_library_still_works_after_errors(dev):
    for _ in range(3):
        with pytest.raises(S.SporaError):
            S.op_call("uniform", [], {"shape": [-1], "seed": 0}, device=dev)
    t = S.op_call("uniform", [], {"shape": [3], "seed": 0}, device=dev)[0]
    assert t.shape == (3,)
    z = S.op_call("zeros", [], {"shape": [2]}, device=dev)[0]
    np.testing.assert_array_equal(z.numpy(), 0)
