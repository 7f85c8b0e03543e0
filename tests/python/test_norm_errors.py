"""Bad input to the "norm" family (softmax family, batch/layer/group norm and
their grads, cross_entropy, nll_loss): every case must fail with
SPORA_ERROR_INVALID_ARGUMENT and a message that starts with the op in
brackets, never crash. Also: out-of-range class indices give NaN losses on
every device instead of reading out of bounds."""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
INVALID = S.ERROR_INVALID_ARGUMENT


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def T(dev, shape, dtype=np.float32, value=None):
    a = np.ones(shape, dtype) if value is None else np.asarray(value, dtype)
    return S.Tensor.from_numpy(dev, a)


def expect_invalid(op, inputs, attrs=None, outputs=1, fragments=()):
    with pytest.raises(S.SporaError) as info:
        S.op_call(op, inputs, attrs, num_outputs=outputs)
    e = info.value
    assert e.status == INVALID, f"status {e.status} ({S.status_string(e.status)}): {e.message}"
    assert e.message.startswith(f"[{op}]"), e.message
    for f in fragments:
        assert f in e.message, f"{f!r} not in {e.message!r}"
    return e


# -- softmax family ----------------------------------------------------------

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_bad_input(dev, op):
    x = T(dev, (2, 3))
    expect_invalid(op, [x], {"axis": 2}, fragments=["axis 2"])
    expect_invalid(op, [x], {"axis": -3}, fragments=["axis -3"])
    expect_invalid(op, [x], {"axis": 0.5}, fragments=["'axis'"])
    expect_invalid(op, [T(dev, (2, 3), np.int32)], fragments=["i32"])
    expect_invalid(op, [x, x])


@pytest.mark.parametrize("op", ["softmax_grad", "log_softmax_grad"])
def test_softmax_grad_bad_input(dev, op):
    y = T(dev, (2, 3))
    expect_invalid(op, [y, T(dev, (3, 2))], fragments=["(2,3)", "(3,2)"])
    expect_invalid(op, [y, T(dev, (2, 3), np.float64)], fragments=["different dtypes"])
    expect_invalid(op, [y, y], {"axis": 5}, fragments=["axis 5"])
    expect_invalid(op, [y])


# -- batch_norm --------------------------------------------------------------

def bn_inputs(dev, x_shape=(4, 3, 2), c=3, dtype=np.float32):
    return [T(dev, x_shape, dtype)] + [T(dev, (c,), dtype) for _ in range(4)]


def test_batch_norm_bad_input(dev):
    ok = {"training": True}
    expect_invalid("batch_norm", bn_inputs(dev, (3,), 3), ok, 5, ["rank >= 2", "(3,)"])
    expect_invalid("batch_norm", bn_inputs(dev, (4, 3, 2), 4), ok, 5, ["gamma", "(3,)", "(4,)"])
    bad_rv = bn_inputs(dev)
    bad_rv[4] = T(dev, (3, 1))
    expect_invalid("batch_norm", bad_rv, ok, 5, ["running_var", "(3,1)"])
    expect_invalid("batch_norm", bn_inputs(dev), None, 5, ["'training'", "required"])
    expect_invalid("batch_norm", bn_inputs(dev), {"training": "yes"}, 5, ["'training'"])
    expect_invalid("batch_norm", bn_inputs(dev), {"training": True, "momentum": 1.5}, 5, ["momentum", "1.5"])
    expect_invalid("batch_norm", bn_inputs(dev), {"training": True, "momentum": float("nan")}, 5, ["momentum"])
    expect_invalid("batch_norm", bn_inputs(dev), {"training": True, "eps": -1e-5}, 5, ["eps"])
    expect_invalid("batch_norm", bn_inputs(dev), {"training": True, "eps": float("inf")}, 5, ["eps"])
    expect_invalid("batch_norm", bn_inputs(dev, (1, 3)), ok, 5, ["more than one value per channel"])
    expect_invalid("batch_norm", bn_inputs(dev, (1, 3, 1, 1)), ok, 5, ["more than one value per channel"])
    expect_invalid("batch_norm", bn_inputs(dev, dtype=np.int32), ok, 5, ["i32"])
    mixed = bn_inputs(dev)
    mixed[1] = T(dev, (3,), np.float64)
    expect_invalid("batch_norm", mixed, ok, 5, ["different dtypes"])
    expect_invalid("batch_norm", bn_inputs(dev), ok, 1, ["produces 5 output(s)"])
    expect_invalid("batch_norm", bn_inputs(dev)[:4], ok, 5)
    expect_invalid("batch_norm", bn_inputs(dev), {"training": True, "groups": 2}, 5, ["unknown attribute"])


def test_batch_norm_inference_allows_one_value_per_channel(dev):
    (y, *_) = S.op_call("batch_norm", bn_inputs(dev, (1, 3)), {"training": False}, num_outputs=5)
    assert y.shape == (1, 3)


def grad_inputs(dev, x_shape, param_shape, stats_shape, dtype=np.float32, stats_dtype=np.float32):
    return [T(dev, x_shape, dtype), T(dev, x_shape, dtype), T(dev, param_shape, dtype),
            T(dev, stats_shape, stats_dtype), T(dev, stats_shape, stats_dtype)]


def test_batch_norm_grad_bad_input(dev):
    op = "batch_norm_grad"
    expect_invalid(op, grad_inputs(dev, (4, 3), (3,), (4,)), None, 3, ["batch_mean", "(3,)", "(4,)"])
    bad_dy = grad_inputs(dev, (4, 3), (3,), (3,))
    bad_dy[1] = T(dev, (4, 1))
    expect_invalid(op, bad_dy, None, 3, ["dy", "(4,3)", "(4,1)"])
    # f16 x saves f32 statistics: f16 ones are a mistake worth naming.
    expect_invalid(op, grad_inputs(dev, (4, 3), (3,), (3,), np.float16, np.float16), None, 3,
                   ["batch_mean must be f32 for f16 input"])
    expect_invalid(op, grad_inputs(dev, (4, 3), (3,), (3,), np.float64, np.float32), None, 3,
                   ["must be f64 for f64 input"])
    expect_invalid(op, grad_inputs(dev, (4, 3), (3,), (3,), stats_dtype=np.int64), None, 3, ["got i64"])
    expect_invalid(op, grad_inputs(dev, (3,), (3,), (3,)), None, 3, ["rank >= 2"])


# -- layer_norm --------------------------------------------------------------

def test_layer_norm_bad_input(dev):
    x, p = T(dev, (2, 3, 4)), T(dev, (4,))
    expect_invalid("layer_norm", [x, p, p], {"normalized_ndim": 0}, 3, ["normalized_ndim", "1..3"])
    expect_invalid("layer_norm", [x, p, p], {"normalized_ndim": 4}, 3, ["normalized_ndim"])
    expect_invalid("layer_norm", [x, p, p], {"normalized_ndim": 2}, 3, ["gamma", "(3,4)", "(4,)"])
    expect_invalid("layer_norm", [x, T(dev, (3,)), p], None, 3, ["gamma", "(4,)", "(3,)"])
    expect_invalid("layer_norm", [x, p, T(dev, (1, 4))], None, 3, ["beta"])
    expect_invalid("layer_norm", [x, p, p], {"eps": float("nan")}, 3, ["eps"])
    expect_invalid("layer_norm", [T(dev, ()), T(dev, ()), T(dev, ())], None, 3, ["normalized_ndim"])
    expect_invalid("layer_norm", [x, p, T(dev, (4,), np.float16)], None, 3, ["different dtypes"])


def test_layer_norm_grad_bad_input(dev):
    op = "layer_norm_grad"
    expect_invalid(op, grad_inputs(dev, (2, 3, 4), (4,), (2,)), None, 3, ["mean", "(2,3)", "(2,)"])
    expect_invalid(op, grad_inputs(dev, (2, 3, 4), (3, 4), (2, 3)), None, 3, ["gamma", "(4,)"])
    expect_invalid(op, grad_inputs(dev, (2, 3, 4), (3, 4), (2,)), {"normalized_ndim": 3}, 3, ["gamma"])
    expect_invalid(op, grad_inputs(dev, (2, 4), (4,), (2,), np.float16, np.float16), None, 3, ["must be f32"])


# -- group_norm --------------------------------------------------------------

def test_group_norm_bad_input(dev):
    x, p = T(dev, (2, 6, 5)), T(dev, (6,))
    expect_invalid("group_norm", [x, p, p], {"groups": 0}, 3, ["groups must be positive, got 0"])
    expect_invalid("group_norm", [x, p, p], {"groups": -2}, 3, ["groups must be positive"])
    expect_invalid("group_norm", [x, p, p], {"groups": 4}, 3, ["groups (4) must divide", "(6)"])
    expect_invalid("group_norm", [x, p, p], None, 3, ["'groups'", "required"])
    expect_invalid("group_norm", [x, T(dev, (3,)), p], {"groups": 3}, 3, ["gamma", "(6,)", "(3,)"])
    expect_invalid("group_norm", [T(dev, (6,)), p, p], {"groups": 3}, 3, ["rank >= 2"])
    expect_invalid("group_norm", [x, p, p], {"groups": 3, "eps": -1.0}, 3, ["eps"])


def test_group_norm_grad_bad_input(dev):
    op = "group_norm_grad"
    expect_invalid(op, grad_inputs(dev, (2, 6, 5), (6,), (2, 3)), {"groups": 2}, 3, ["mean", "(2,2)", "(2,3)"])
    expect_invalid(op, grad_inputs(dev, (2, 6, 5), (6,), (6,)), {"groups": 3}, 3, ["mean"])
    expect_invalid(op, grad_inputs(dev, (2, 6, 5), (6,), (2, 3)), {"groups": 5}, 3, ["must divide"])


# -- losses ------------------------------------------------------------------

@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_loss_bad_input(dev, op):
    x = T(dev, (4, 5))
    t = T(dev, (4,), np.int64, [0, 1, 2, 3])
    expect_invalid(op, [x, T(dev, (4,))], fragments=["i32 or i64", "f32"])
    expect_invalid(op, [x, T(dev, (4,), np.uint8)], fragments=["i32 or i64"])
    expect_invalid(op, [x, T(dev, (5,), np.int64)], fragments=["target must have shape (4,)", "(5,)"])
    expect_invalid(op, [x, T(dev, (4, 1), np.int64)], fragments=["(4,1)"])
    expect_invalid(op, [T(dev, (4, 5, 3)), t], fragments=["(4,3)"])
    expect_invalid(op, [T(dev, ()), T(dev, (), np.int64, 0)], fragments=["scalar"])
    expect_invalid(op, [x, t], {"reduction": "avg"}, fragments=['"avg"'])
    expect_invalid(op, [x, t], {"reduction": 1}, fragments=["'reduction'"])
    expect_invalid(op, [x, t], {"label_smoothing": 1.5}, fragments=["label_smoothing", "1.5"])
    expect_invalid(op, [x, t], {"label_smoothing": -0.1}, fragments=["label_smoothing"])
    expect_invalid(op, [x, t], {"label_smoothing": float("nan")}, fragments=["label_smoothing"])
    expect_invalid(op, [x, t], {"ignore_index": 0.5}, fragments=["'ignore_index'"])
    expect_invalid(op, [T(dev, (4, 5), np.int64), t], fragments=["i64"])
    expect_invalid(op, [x], fragments=["2 input(s)"])


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("tdt", [np.int32, np.int64])
def test_loss_out_of_range_target_is_nan(dev, op, tdt):
    big = np.iinfo(tdt).max
    x = T(dev, (6, 5), np.float32, np.linspace(-1, 1, 30).reshape(6, 5))
    t = T(dev, (6,), tdt, [0, 5, -1, big, -big, 4])
    (none,) = S.op_call(op, [x, t], {"reduction": "none", "ignore_index": -1})
    v = none.numpy()
    assert np.isnan(v[[1, 3, 4]]).all(), v
    assert v[2] == 0 and np.isfinite(v[[0, 5]]).all(), v
    for red in ["mean", "sum"]:
        (r,) = S.op_call(op, [x, t], {"reduction": red, "ignore_index": -1})
        assert np.isnan(r.numpy()), red


def test_huge_zero_size_shapes_are_rejected(dev):
    # (0, 2^32, 2^32) has no elements, but C * S does not fit the kernels' offsets.
    x = S.Tensor.zeros(dev, (0, 1 << 32, 1 << 32))
    p = T(dev, (1,))
    expect_invalid("batch_norm", [x, p, p, p, p], {"training": True}, 5, ["more elements than fit"])
    expect_invalid("group_norm", [x, p, p], {"groups": 1}, 3, ["more elements than fit"])
    expect_invalid("cross_entropy", [x, S.Tensor.zeros(dev, (0, 1 << 32), S.DTYPE_I64)],
                   fragments=["more elements than fit"])
