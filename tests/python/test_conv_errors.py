"""Bad input to the conv family (convolutions and pooling) through the C API:
every case must fail with SPORA_ERROR_INVALID_ARGUMENT and a message that
starts with the op in brackets and says what is wrong. Never a crash."""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def t(dev, shape, dtype=np.float32):
    return S.Tensor.from_numpy(dev, np.zeros(shape, dtype))


def expect_error(dev, op, shapes, attrs, *words, dtypes=None):
    dtypes = dtypes or [np.float32] * len(shapes)
    ins = [t(dev, s, d) for s, d in zip(shapes, dtypes)]
    with pytest.raises(S.SporaError) as e:
        S.op_call(op, ins, attrs, device=dev)
    assert e.value.status == S.ERROR_INVALID_ARGUMENT, e.value.message
    msg = e.value.message
    assert msg.startswith(f"[{op}]"), msg
    for w in words:
        assert w in msg, msg
    return msg


X, W = [1, 4, 8, 8], [6, 4, 3, 3]

CONV_CASES = [
    ("stride0", {"stride": [0, 1]}, ["stride must be positive, got 0"]),
    ("stride3", {"stride": [1, 1, 1]}, ["stride must have 1 or 2 values"]),
    ("stride_huge", {"stride": [1 << 40]}, ["stride", "too large"]),
    ("dilation_neg", {"dilation": [-1]}, ["dilation must be positive, got -1"]),
    ("padding_neg", {"padding": [1, -1]}, ["padding must be non-negative, got -1"]),
    ("padding3", {"padding": [1, 1, 1]}, ["padding must have 1, 2 or 4 values"]),
    ("pad_mode", {"pad_mode": "full"}, ["pad_mode", "full"]),
    ("pad_mode_and_padding", {"pad_mode": "same", "padding": [1, 1]}, ["padding must be zero", "same"]),
    ("groups0", {"groups": 0}, ["groups must be positive, got 0"]),
    ("groups_c", {"groups": 3}, ["groups (3) must divide the input channels (4)"]),
    ("stride_type", {"stride": "2"}, ["attribute 'stride' must be ints"]),
    ("unknown", {"strides": [1, 1]}, ["unknown attribute 'strides'"]),
]


@pytest.mark.parametrize("name,attrs,words", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv2d_bad_attrs(dev, name, attrs, words):
    expect_error(dev, "conv2d", [X, W], attrs, *words)


def test_conv2d_groups_must_divide_output_channels(dev):
    expect_error(dev, "conv2d", [[1, 4, 8, 8], [5, 2, 3, 3]], {"groups": 2}, "must divide the output channels (5")


def test_conv2d_weight_channels(dev):
    expect_error(dev, "conv2d", [[1, 4, 8, 8], [6, 3, 3, 3]], {}, "input channels per group")


def test_conv2d_rank(dev):
    expect_error(dev, "conv2d", [[4, 8, 8], W], {}, "x must have rank 4")
    expect_error(dev, "conv2d", [X, [6, 4, 3]], {}, "w must have rank 4")


def test_conv2d_zero_kernel(dev):
    expect_error(dev, "conv2d", [X, [6, 4, 0, 3]], {}, "kernel size must be positive")


def test_conv2d_kernel_larger_than_input(dev):
    expect_error(dev, "conv2d", [[1, 4, 4, 4], [6, 4, 5, 3]], {"padding": [0]}, "larger than the padded input")
    expect_error(dev, "conv2d", [[1, 4, 4, 4], [6, 4, 3, 3]], {"dilation": [1, 3]}, "larger than the padded input")


def test_conv2d_dtypes(dev):
    expect_error(dev, "conv2d", [X, W], {}, "dtype i32", dtypes=[np.int32, np.int32])
    expect_error(dev, "conv2d", [X, W], {}, "different dtypes", dtypes=[np.float32, np.float64])


def test_conv2d_bias_shape(dev):
    expect_error(dev, "conv2d_bias", [X, W, [4]], {}, "bias must have shape (6,)")
    expect_error(dev, "conv2d_bias", [X, W, [1, 6]], {}, "bias must have shape (6,)")


def test_conv2d_input_count(dev):
    expect_error(dev, "conv2d", [X], {}, "takes 2 input(s)")


def test_conv2d_grad_input(dev):
    op = "conv2d_grad_input"
    expect_error(dev, op, [[1, 6, 6, 6], W], {}, "'input_shape'", "required")
    expect_error(dev, op, [[1, 6, 6, 6], W], {"input_shape": [1, 4, 8]}, "input_shape must have 4 values")
    expect_error(dev, op, [[1, 6, 6, 6], W], {"input_shape": [1, 4, -8, 8]}, "negative")
    expect_error(dev, op, [[1, 6, 5, 6], W], {"input_shape": [1, 4, 8, 8]}, "dy has shape (1,6,5,6)")
    expect_error(dev, op, [[1, 6, 6, 6], W], {"input_shape": [1, 4, 8, 8], "stride": [0]}, "stride must be positive")


def test_conv2d_grad_weight(dev):
    op = "conv2d_grad_weight"
    expect_error(dev, op, [X, [1, 6, 6, 6]], {}, "'weight_shape'", "required")
    expect_error(dev, op, [X, [1, 6, 6, 6]], {"weight_shape": [6, 4, 3, 3], "groups": 2}, "input channels per group")
    expect_error(dev, op, [X, [1, 6, 4, 4]], {"weight_shape": [6, 4, 3, 3]}, "dy has shape (1,6,4,4)")


def test_conv2d_transpose(dev):
    op = "conv2d_transpose"
    x, w = [1, 4, 5, 5], [4, 3, 3, 3]
    expect_error(dev, op, [x, w], {"stride": 2, "output_padding": 2}, "output_padding (2) must be smaller than stride (2)")
    expect_error(dev, op, [x, w], {"output_padding": [-1, 0]}, "output_padding must be non-negative")
    expect_error(dev, op, [x, [5, 3, 3, 3]], {}, "must have the input channels (4) in dim 0")
    expect_error(dev, op, [x, w], {"groups": 3}, "groups (3) must divide the input channels (4)")
    expect_error(dev, op, [x, w], {"padding": [4, 4]}, "padding is too large")
    expect_error(dev, op, [x, w], {"stride": [0, 1]}, "stride must be positive, got 0")


def test_conv2d_transpose_element_count_overflow(dev):
    # Each spatial dim of the output is ~2^32; their product overflows int64.
    expect_error(dev, "conv2d_transpose", [[1, 1, 3, 3], [1, 1, 1, 1]], {"stride": (1 << 31) - 1},
                 "more elements than fit in int64")


POOL_CASES = [
    ("kernel0", {"kernel_size": [0, 2]}, ["kernel_size must be positive, got 0"]),
    ("kernel3", {"kernel_size": [2, 2, 2]}, ["kernel_size must have 1 or 2 values"]),
    ("stride0", {"kernel_size": 2, "stride": [0]}, ["stride must be positive, got 0"]),
    ("padding_half", {"kernel_size": 3, "padding": [2]}, ["padding (2) must be at most half the kernel size (3)"]),
    ("padding_neg", {"kernel_size": 3, "padding": [-1]}, ["padding must be non-negative"]),
    ("too_big", {"kernel_size": 9}, ["larger than the padded input"]),
    ("ceil_type", {"kernel_size": 2, "ceil_mode": "yes"}, ["attribute 'ceil_mode' must be bool"]),
]


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("name,attrs,words", POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_pool_bad_attrs(dev, op, name, attrs, words):
    expect_error(dev, op, [X], attrs, *words)


def test_pool_missing_kernel(dev):
    expect_error(dev, "max_pool2d", [X], {}, "'kernel_size'", "required")


def test_max_pool_dilation(dev):
    expect_error(dev, "max_pool2d", [X], {"kernel_size": 2, "dilation": [0]}, "dilation must be positive, got 0")
    expect_error(dev, "max_pool2d", [X], {"kernel_size": 3, "dilation": 4}, "dilated kernel")
    # avg_pool2d has no dilation (as in PyTorch)
    expect_error(dev, "avg_pool2d", [X], {"kernel_size": 2, "dilation": 2}, "unknown attribute 'dilation'")


def test_pool_input_shape(dev):
    expect_error(dev, "max_pool2d", [[4, 8, 8]], {"kernel_size": 2}, "rank 4")
    expect_error(dev, "avg_pool2d", [[1, 4, 0, 8]], {"kernel_size": 1}, "non-empty spatial dims")
    expect_error(dev, "max_pool2d", [X], {"kernel_size": 2}, "dtype i32", dtypes=[np.int32])


def test_max_pool2d_grad(dev):
    op = "max_pool2d_grad"
    expect_error(dev, op, [X, [1, 4, 3, 4]], {"kernel_size": 2}, "dy has shape (1,4,3,4)")
    expect_error(dev, op, [X, [1, 4, 4, 4]], {"kernel_size": 2}, "different dtypes", dtypes=[np.float32, np.float64])


def test_avg_pool2d_grad(dev):
    op = "avg_pool2d_grad"
    expect_error(dev, op, [[1, 4, 4, 4]], {"kernel_size": 2}, "'input_shape'", "required")
    expect_error(dev, op, [[1, 4, 4, 4]], {"kernel_size": 2, "input_shape": [1, 4, 9, 9, 1]}, "4 values")
    expect_error(dev, op, [[1, 4, 4, 4]], {"kernel_size": 2, "input_shape": [1, 4, 10, 8]}, "dy has shape (1,4,4,4)")


def test_adaptive_avg_pool2d(dev):
    op = "adaptive_avg_pool2d"
    expect_error(dev, op, [X], {}, "'output_size'", "required")
    expect_error(dev, op, [X], {"output_size": [0, 2]}, "output_size must be positive, got 0")
    expect_error(dev, op, [X], {"output_size": [2, 2, 2]}, "output_size must have 1 or 2 values")
    expect_error(dev, op, [[1, 4, 8, 0]], {"output_size": 2}, "non-empty spatial dims")


def test_adaptive_avg_pool2d_grad(dev):
    op = "adaptive_avg_pool2d_grad"
    expect_error(dev, op, [[1, 4, 2, 2]], {"input_shape": [1, 3, 8, 8]}, "differ in batch or channels")
    expect_error(dev, op, [[1, 4, 2, 2]], {"input_shape": [1, 4, 0, 8]}, "non-empty spatial dims")


def test_valid_calls_still_work(dev):
    # The attribute forms the errors above reject neighbours of: single values,
    # asymmetric padding, "same" with stride.
    x = t(dev, [1, 4, 8, 8])
    w = t(dev, W)
    y = S.op_call("conv2d", [x, w], {"stride": 2, "pad_mode": "same"}, device=dev)[0]
    assert y.shape == (1, 6, 4, 4)
    y = S.op_call("conv2d", [x, w], {"padding": [1, 0, 2, 1]}, device=dev)[0]
    assert y.shape == (1, 6, 7, 9)
    y = S.op_call("max_pool2d", [x], {"kernel_size": 3, "stride": 2, "ceil_mode": True}, device=dev)[0]
    assert y.shape == (1, 4, 4, 4)
    y = S.op_call("adaptive_avg_pool2d", [x], {"output_size": 3}, device=dev)[0]
    assert y.shape == (1, 4, 3, 3)
