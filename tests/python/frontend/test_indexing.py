"""NumPy-style indexing and slicing (__getitem__) and assignment
(__setitem__) against NumPy."""
import numpy as np
import pytest

import spora

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

GET = [
    (1,), (-1,), (slice(None),), (slice(1, None),), (slice(None, None, -1),),
    (0, 1), (0, -1, 2), (1, slice(None), 3), (slice(None), slice(0, 3, 2)),
    (Ellipsis, 1), (Ellipsis, slice(None, None, -2)), (0, Ellipsis, 0),
    (None,), (slice(None), None, 1), (0, None, slice(1, 3), None),
    (slice(-1, None, -1), slice(2, 0, -1)), (slice(5, 10),), (slice(1, 1),),
    (np.int64(1), 2),
]


@pytest.mark.parametrize("idx", GET, ids=[repr(i) for i in GET])
def test_basic_getitem(idx):
    got = spora.Tensor(A)[idx]
    want = A[idx]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.asnumpy(), want)


ADV = [
    ([1, 0],),
    (np.array([1, 0, 1]),),
    (slice(None), np.array([0, 2, 2])),
    (0, np.array([[0, 1], [2, 2]])),
    (np.array([0, 1]), np.array([1, 2])),
    (np.array([0, 1]), slice(None), np.array([3, 0])),
    (A[:, :, :, 0] > 30,),
    (0, A[0] > 30),
    (Ellipsis, np.array([4, 0])),
    (np.array([-1, 0]),),
]


@pytest.mark.parametrize("idx", ADV, ids=range(len(ADV)))
def test_advanced_getitem(idx):
    got = spora.Tensor(A)[idx]
    want = A[idx]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.asnumpy(), want)


def test_index_with_tensors():
    t = spora.Tensor(A)
    i = spora.Tensor(np.array([1, 0], np.int64))
    np.testing.assert_array_equal(t[i].asnumpy(), A[[1, 0]])
    m = spora.Tensor(A > 100)
    np.testing.assert_array_equal(t[m].asnumpy(), A[A > 100])
    np.testing.assert_array_equal(t[spora.Tensor(1)].asnumpy(), A[1])


def test_index_errors():
    t = spora.Tensor(A)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0, 0]
    with pytest.raises(IndexError):
        t[..., ...]


SET = [
    ((0,), 7.0),
    ((slice(None), 1), -1.0),
    ((Ellipsis, slice(None, None, 2)), 3.0),
    ((0, 1, 2), np.arange(5, dtype=np.float32)),
    ((A > 50,), 0.0),
    ((np.array([1, 1]), 0), 9.0),
    ((slice(None), slice(None), 0, 0), np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)),
]


@pytest.mark.parametrize("idx,val", SET, ids=range(len(SET)))
def test_setitem(idx, val):
    want = A.copy()
    want[idx] = val
    t = spora.Tensor(A)
    before = t[0]  # taken before: keeps the old value (functional update)
    t[idx] = val
    np.testing.assert_array_equal(t.asnumpy(), want)
    np.testing.assert_array_equal(before.asnumpy(), A[0])


def test_setitem_with_tensor_value_and_int_dtype():
    a = np.arange(6, dtype=np.int32)
    t = spora.Tensor(a)
    t[1:3] = spora.Tensor(np.array([40, 50], np.int32))
    a[1:3] = [40, 50]
    np.testing.assert_array_equal(t.asnumpy(), a)
    assert t.dtype == spora.int32


def test_setitem_repeated_index_last_wins():
    a = np.zeros(4, np.float32)
    t = spora.Tensor(a)
    t[[1, 1, 2]] = spora.Tensor(np.array([5.0, 6.0, 7.0], np.float32))
    a[[1, 1, 2]] = [5.0, 6.0, 7.0]
    np.testing.assert_array_equal(t.asnumpy(), a)


def test_indexing_on_another_device():
    t = spora.Tensor(A, device="sim:0")
    np.testing.assert_array_equal(t[1, ::2].asnumpy(), A[1, ::2])
    np.testing.assert_array_equal(t[A > 100].asnumpy(), A[A > 100])
    t[0, 0] = -1.0
    want = A.copy()
    want[0, 0] = -1.0
    np.testing.assert_array_equal(t.asnumpy(), want)
    assert t.device == "sim:0"
