"""Bad input to the layout and indexing ops must fail with
SPORA_ERROR_INVALID_ARGUMENT and a message that starts with the op in
brackets; extreme index values must never crash or read out of bounds."""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = CTX.devices()
CPU = CTX.device_find("cpu")


def t(shape, dtype=np.float32, values=None, device=CPU):
    a = np.zeros(shape, dtype) if values is None else np.asarray(values, dtype).reshape(shape)
    return S.Tensor.from_numpy(device, a)


def expect(op, inputs, attrs=None, fragment="", outputs=1, status=S.ERROR_INVALID_ARGUMENT):
    with pytest.raises(S.SporaError) as info:
        S.op_call(op, inputs, attrs, num_outputs=outputs, device=CPU)
    err = info.value
    assert err.status == status, f"{op}: status {err.status}, message {err.message!r}"
    assert err.message.startswith(f"[{op}]"), f"message does not name the op: {err.message!r}"
    assert fragment in err.message, f"{fragment!r} not in {err.message!r}"
    return err


# -- concat / stack / split --------------------------------------------------

def test_concat_errors():
    expect("concat", [], None, "takes 1 to 64 inputs, got 0")
    expect("concat", [t(()), t(())], None, "rank-0")
    expect("concat", [t((2, 3)), t((2,))], {"axis": 0}, "rank")
    expect("concat", [t((2, 3)), t((3, 3))], {"axis": 1}, "differs from input 0's")
    expect("concat", [t((2, 3)), t((2, 3))], {"axis": 2}, "axis 2 is out of range")
    expect("concat", [t((2, 3)), t((2, 3), np.int32)], None, "different dtypes")
    expect("concat", [t((2, 3))], {"axis": "x"}, "attribute 'axis' must be int")
    expect("concat", [t((2, 3))], {"dim": 0}, "unknown attribute 'dim'")
    expect("concat", [t((2,))] * 65, None, "too many inputs")


def test_stack_errors():
    expect("stack", [t((2, 3)), t((3, 2))], None, "stacked tensors must match")
    expect("stack", [t((2,))], {"axis": 2}, "axis 2 is out of range")
    expect("stack", [t((1,) * 8)], None, "exceed rank 8")


def test_split_errors():
    x = t((5, 4))
    expect("split", [x], {"sections": 2}, "does not divide into 2 equal sections", outputs=2)
    expect("split", [x], {"sections": 5, "sizes": [1, 4]}, "not both", outputs=2)
    expect("split", [x], None, "give sections", outputs=1)
    expect("split", [x], {"sections": -1}, "sections must be positive", outputs=1)
    expect("split", [x], {"sizes": [6, -1]}, "sizes[1] is negative", outputs=2)
    expect("split", [x], {"sizes": [2, 2]}, "add up to 4", outputs=2)
    expect("split", [t((65,))], {"sections": 65}, "at most 64", outputs=64)
    expect("split", [x], {"sections": 5}, "produces 5 output(s), caller asked for 2", outputs=2)
    expect("split", [t(())], {"sections": 1}, "rank-0", outputs=1)
    expect("split", [x], {"axis": -3, "sections": 1}, "out of range", outputs=1)


# -- slices ------------------------------------------------------------------

def test_slice_errors():
    x = t((4, 5))
    expect("slice", [x], {"starts": [0, 1], "ends": [2]}, "ends has 1")
    expect("slice", [x], {"starts": [0], "ends": [2], "axes": [0, 1]}, "axes has 2")
    expect("slice", [x], {"starts": [0, 0], "ends": [2, 2], "axes": [1, -1]}, "appears twice")
    expect("slice", [x], {"starts": [0], "ends": [2], "axes": [2]}, "out of range")
    expect("slice", [x], {"starts": [0, 0, 0], "ends": [1, 1, 1]}, "3 axes given for a rank-2")
    expect("slice", [x], {"ends": [1]}, "attribute 'starts' (ints) is required")


def test_strided_slice_errors():
    x = t((4, 5))
    expect("strided_slice", [x], {"begin": [0], "end": [4], "strides": [0]}, "strides must be non-zero")
    expect("strided_slice", [x], {"begin": [0, 0], "end": [4]}, "end has 1")
    expect("strided_slice", [x], {"begin": [0], "end": [4], "strides": [1, 1]}, "strides has 2")
    expect("strided_slice", [x], {"begin": [0, 0, 0], "end": [1, 1, 1]}, "rank-2")


# -- reshaping ops -----------------------------------------------------------

def test_reshape_transpose_errors():
    expect("reshape", [t((2, 3))], {"shape": [4, 2]}, "cannot reshape")
    expect("reshape", [t((2, 3))], {"shape": [-1, -1]}, "only one dimension may be -1")
    expect("reshape", [t((0,))], {"shape": [2**40, 2**40, 0]}, "more elements than fit in int64")
    expect("transpose", [t((2, 3))], {"perm": [0, 0]}, "twice")
    expect("transpose", [t((2, 3))], {"perm": [0]}, "has 1 entries for rank 2")


def test_broadcast_to_errors():
    expect("broadcast_to", [t((3,))], {"shape": [2, 4]}, "cannot broadcast")
    expect("broadcast_to", [t((2, 3))], {"shape": [3]}, "fewer dims")
    expect("broadcast_to", [t((1,))], {"shape": [-2]}, "negative")
    expect("broadcast_to", [t((1,))], {"shape": [2**40, 2**40]}, "more elements than fit in int64")
    expect("broadcast_to", [t((1,))], {"shape": [1] * 9}, "rank 9 exceeds 8")


def test_expand_dims_squeeze_errors():
    expect("expand_dims", [t((2, 3))], {"axes": [3]}, "out of range")
    expect("expand_dims", [t((2, 3))], {"axes": [0, 0]}, "appears twice")
    expect("expand_dims", [t((1,) * 7)], {"axes": [0, 1]}, "exceeds 8")
    expect("expand_dims", [t((2,))], None, "attribute 'axes' (ints) is required")
    expect("squeeze", [t((2, 1))], {"axes": [0]}, "cannot squeeze axis 0 of size 2")
    expect("squeeze", [t((1, 1))], {"axes": [0, -2]}, "appears twice")
    expect("squeeze", [t(())], {"axes": [0]}, "out of range for rank 0")


def test_tile_flip_errors():
    expect("tile", [t((2,))], {"reps": [-1]}, "negative")
    expect("tile", [t((2, 2))], {"reps": [2**62, 1]}, "overflows int64")
    expect("tile", [t((2, 2))], {"reps": [2**31, 2**31]}, "more elements than fit in int64")
    expect("tile", [t((2,))], {"reps": [1] * 9}, "at most 8")
    expect("flip", [t((2, 3))], {"axes": [1, -1]}, "appears twice")
    expect("flip", [t((2, 3))], {"axes": [2]}, "out of range")


def test_pad_errors():
    x = t((2, 3))
    expect("pad", [x], {"pads": [1, 1]}, "needs 4")
    expect("pad", [x], {"pads": [1, -1, 0, 0]}, "must be non-negative")
    expect("pad", [x], {"pads": [0, 0, 0, 0], "mode": "wrap"}, 'mode must be "constant", "reflect" or "edge"')
    expect("pad", [t((0, 3))], {"pads": [1, 0, 0, 0], "mode": "reflect"}, "cannot pad dim 0, which is empty")
    expect("pad", [t((0, 3))], {"pads": [0, 1, 0, 0], "mode": "edge"}, "which is empty")
    expect("pad", [t((2,), np.int32)], {"pads": [1, 1], "value": 1.5}, "not representable in i32")
    expect("pad", [t((2,), np.uint8)], {"pads": [1, 1], "value": -1}, "not representable in u8")
    expect("pad", [t((2,), np.bool_)], {"pads": [1, 1], "value": 2}, "not representable in bool")
    expect("pad", [t((2,))], {"pads": [2**62, 2**62]}, "overflows int64")
    expect("pad", [x], {"pads": [0, 0, 0, 0], "mode": 1}, "attribute 'mode' must be string")


# -- indexing ----------------------------------------------------------------

def test_gather_family_errors():
    x = t((4, 3))
    expect("gather", [x, t((2,), np.float32)], None, "input 'indices' must be i32 or i64, got f32")
    expect("gather", [x, t((2,), np.uint8)], None, "must be i32 or i64, got u8")
    expect("gather", [t(()), t((2,), np.int64)], None, "rank-0")
    expect("gather", [x, t((2,), np.int64)], {"axis": 2}, "out of range")
    expect("gather", [t((1,) * 8), t((2, 2), np.int64)], None, "rank 9 exceeds 8")
    expect("embedding", [t((4, 3, 2)), t((2,), np.int64)], None, "weight must be 2-D")
    expect("embedding", [x, t((2,), np.float64)], None, "input 'ids' must be i32 or i64")
    expect("index_select", [x, t((2, 2), np.int64)], None, "index must be 1-D")
    expect("index_select", [x, t((2,), np.int32)], {"axis": -3}, "out of range")


def test_gather_nd_errors():
    x = t((4, 3))
    expect("gather_nd", [x, t((2, 3), np.int64)], None, "more than x's rank 2")
    expect("gather_nd", [x, t((), np.int64)], None, "rank >= 1")
    expect("gather_nd", [x, t((2, 1), np.float32)], None, "must be i32 or i64")


def test_scatter_add_errors():
    x = t((4, 3))
    i64 = np.int64
    expect("scatter_add", [x, t((4,), i64), t((4, 3))], None, "same rank")
    expect("scatter_add", [x, t((4, 3), i64), t((2, 3))], None, "larger than updates")
    expect("scatter_add", [x, t((2, 4), i64), t((2, 4))], None, "larger than x")
    expect("scatter_add", [x, t((2, 3), i64), t((2, 3), np.float64)], None, "different dtypes")
    expect("scatter_add", [x, t((2, 3), np.float32), t((2, 3))], None, "must be i32 or i64")
    expect("scatter_add", [x, t((2, 3), i64), t((2, 3))], {"axis": 2}, "out of range")


def test_one_hot_errors():
    idx = t((3,), np.int64)
    expect("one_hot", [idx], {"depth": -1}, "depth must be non-negative")
    expect("one_hot", [idx], None, "attribute 'depth' (int) is required")
    expect("one_hot", [idx], {"depth": 3, "dtype": "float32"}, 'dtype "float32" is not one of')
    expect("one_hot", [idx], {"depth": 3, "dtype": "u8", "on_value": 256}, "on_value 256 is not representable in u8")
    expect("one_hot", [idx], {"depth": 3, "dtype": "i32", "off_value": 0.5}, "off_value 0.5 is not representable")
    expect("one_hot", [t((3,), np.float32)], {"depth": 3}, "has dtype f32, which the op does not support")
    expect("one_hot", [t((1,) * 8, np.int32)], {"depth": 3}, "rank 9 exceeds 8")


def test_one_hot_count_overflow():
    expect("one_hot", [t((4,), np.int32)], {"depth": 2**62}, "more elements than fit in int64")


# -- kernels stay in bounds for any index value --------------------------------

EXTREMES = [np.iinfo(np.int64).min, -2**31 - 1, -5, -4, -1, 0, 3, 4, 2**31, np.iinfo(np.int64).max]


@pytest.mark.parametrize("dev", DEVICES, ids=lambda d: d.name)
@pytest.mark.parametrize("itype", [np.int32, np.int64], ids=["i32", "i64"])
def test_extreme_indices_are_safe(dev, itype):
    vals = np.array([v for v in EXTREMES if np.iinfo(itype).min <= v <= np.iinfo(itype).max], itype)
    n = len(vals)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    ix = S.Tensor.from_numpy(dev, vals)
    xt = S.Tensor.from_numpy(dev, x)

    def valid(v, size):
        return -size <= v < size

    (g,) = S.op_call("gather", [xt, ix], {"axis": 0})
    want = np.stack([x[int(v)] if valid(v, 4) else np.zeros(3, np.float32) for v in vals])
    np.testing.assert_array_equal(g.numpy(), want)

    (e,) = S.op_call("embedding", [xt, ix])
    np.testing.assert_array_equal(e.numpy(), want)

    nd = S.Tensor.from_numpy(dev, np.stack([vals, np.zeros(n, itype)], axis=1))
    (gn,) = S.op_call("gather_nd", [xt, nd])
    np.testing.assert_array_equal(gn.numpy(), want[:, 0])

    (oh,) = S.op_call("one_hot", [ix], {"depth": 4})
    want_oh = np.array([[1.0 if valid(v, 4) and (int(v) % 4) == j else 0.0 for j in range(4)] for v in vals], np.float32)
    np.testing.assert_array_equal(oh.numpy(), want_oh)

    upd = np.ones((n, 1), np.float32)
    (sa,) = S.op_call("scatter_add", [xt, S.Tensor.from_numpy(dev, vals.reshape(n, 1)), S.Tensor.from_numpy(dev, upd)])
    want_sa = x.copy()
    for v in vals:
        if valid(v, 4):
            want_sa[int(v), 0] += 1
    np.testing.assert_array_equal(sa.numpy(), want_sa)


@pytest.mark.parametrize("dev", DEVICES, ids=lambda d: d.name)
def test_views_share_data_and_results_are_fresh(dev):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    xt = S.Tensor.from_numpy(dev, x)
    (v,) = S.op_call("expand_dims", [xt], {"axes": 0})
    (w,) = S.op_call("squeeze", [v])
    assert v.shape == (1, 2, 3) and w.shape == (2, 3)
    np.testing.assert_array_equal(w.numpy(), x)
    xt.free()  # views keep the buffer alive
    np.testing.assert_array_equal(v.numpy()[0], x)


# -- slicing with extreme bounds follows Python's slice semantics ------------------

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
SLICES = [
    (I64_MIN, I64_MAX, 1), (I64_MAX, I64_MIN, -1), (I64_MIN, I64_MAX, I64_MAX), (I64_MAX, I64_MIN, I64_MIN),
    (-2**40, 2**40, 2), (2**40, -2**40, -3), (3, 3, 1), (4, -100, -1), (-1, -7, -2), (0, 0, -1),
]


@pytest.mark.parametrize("dev", DEVICES, ids=lambda d: d.name)
@pytest.mark.parametrize("bounds", SLICES, ids=str)
def test_slicing_with_extreme_bounds(dev, bounds):
    b, e, s = bounds
    x = np.arange(30, dtype=np.int64).reshape(6, 5)
    xt = S.Tensor.from_numpy(dev, x)
    (y,) = S.op_call("strided_slice", [xt], {"begin": [b, b], "end": [e, e], "strides": [s, s]})
    np.testing.assert_array_equal(y.numpy(), x[b:e:s, b:e:s])
    (z,) = S.op_call("slice", [xt], {"starts": [b], "ends": [e], "axes": [1]})
    np.testing.assert_array_equal(z.numpy(), x[:, b:e])
