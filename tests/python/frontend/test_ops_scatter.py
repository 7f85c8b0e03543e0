"""MindSpore's ops.scatter_add(input_x, indices, updates) and ops.tensor_scatter_add (issue 20 lines
3-4): values against NumPy's np.add.at (repeated indices accumulate), indices outside the input add
nothing and never alias another position, a Parameter updated in place (eagerly and inside jit),
gradients, PyTorch's form of scatter_add kept, errors naming the op and the shapes."""
import numpy as np
import pytest

import spora
from spora import ops

RNG = np.random.default_rng(0)


def t(a):
    return spora.Tensor(np.asarray(a))


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    spora.set_device(request.param)
    return request.param


def ref_scatter_add(x, idx, upd):
    out = x.copy()
    np.add.at(out, idx.reshape(-1), upd.reshape((-1,) + x.shape[1:]))
    return out


def ref_tensor_scatter_add(x, idx, upd):
    out = x.copy()
    n = idx.shape[-1]
    flat_idx = idx.reshape(-1, n)
    flat_upd = upd.reshape((-1,) + x.shape[n:])
    for i, pos in enumerate(flat_idx):
        if all(0 <= p < d for p, d in zip(pos, x.shape[:n])):
            out[tuple(pos)] += flat_upd[i]
    return out


@pytest.mark.parametrize("x_shape,idx_shape", [((5,), (7,)), ((5, 3), (4,)), ((6, 2, 3), (2, 3)), ((4, 3), ())])
def test_scatter_add_mindspore_form(device, x_shape, idx_shape):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    idx = RNG.integers(0, x_shape[0], idx_shape).astype(np.int32)
    upd = RNG.standard_normal(idx_shape + x_shape[1:]).astype(np.float32)
    got = ops.scatter_add(t(x), t(idx), t(upd))
    np.testing.assert_allclose(got.asnumpy(), ref_scatter_add(x, idx, upd), rtol=1e-6, atol=1e-6)


def test_scatter_add_updates_a_parameter_in_place(device):
    p = spora.Parameter(spora.Tensor(np.zeros((3, 2), np.float32)), name="acc")
    idx, upd = t(np.array([0, 2, 0], np.int64)), t(np.ones((3, 2), np.float32))
    out = ops.scatter_add(p, idx, upd)
    want = np.array([[2, 2], [0, 0], [1, 1]], np.float32)
    np.testing.assert_array_equal(out.asnumpy(), want)
    np.testing.assert_array_equal(p.asnumpy(), want)

    @spora.jit
    def step(i, u):
        return ops.scatter_add(p, i, u)

    step(idx, upd)
    np.testing.assert_array_equal(p.asnumpy(), 2 * want)
    # A plain Tensor is left as it was: the result is a new tensor.
    x = t(np.zeros((3, 2), np.float32))
    ops.scatter_add(x, idx, upd)
    np.testing.assert_array_equal(x.asnumpy(), np.zeros((3, 2), np.float32))


def test_scatter_add_negative_rows_count_from_the_end_and_out_of_range_ones_add_nothing():
    x = np.zeros((3, 2), np.float32)
    got = ops.scatter_add(t(x), t(np.array([1, 3, -1, -4], np.int32)), t(np.ones((4, 2), np.float32)))
    np.testing.assert_array_equal(got.asnumpy(), [[0, 0], [1, 1], [1, 1]])


def test_scatter_add_gradients():
    idx = t(np.array([[0, 2], [2, 1]], np.int32))
    w = RNG.standard_normal((3, 4)).astype(np.float32)

    def f(x, u):
        return (ops.scatter_add(x, idx, u) * t(w)).sum()

    gx, gu = spora.grad(f, grad_position=(0, 1))(t(np.zeros((3, 4), np.float32)), t(np.ones((2, 2, 4), np.float32)))
    np.testing.assert_allclose(gx.asnumpy(), w)
    np.testing.assert_allclose(gu.asnumpy(), w[np.array([[0, 2], [2, 1]])])


def test_scatter_add_pytorch_form_still_works():
    x = np.zeros((3, 4), np.float32)
    idx = np.array([[0, 1, 2, 0], [2, 0, 0, 1]], np.int64)
    upd = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = x.copy()
    for i in range(2):
        for j in range(4):
            want[idx[i, j], j] += upd[i, j]
    np.testing.assert_array_equal(ops.scatter_add(t(x), t(idx), t(upd)).asnumpy(), want)
    got = ops.scatter_add(t(np.zeros((2, 4), np.float32)), t(np.array([[3, 0], [1, 1]], np.int64)),
                          t(np.ones((2, 2), np.float32)), axis=1)
    np.testing.assert_array_equal(got.asnumpy(), [[1, 0, 0, 1], [0, 2, 0, 0]])


def test_scatter_add_errors():
    with pytest.raises(ValueError, match=r"\[scatter_add\] updates must have shape indices.shape \+ "
                                         r"input_x.shape\[1:\] = \(2, 3\).*got \(2, 4\)"):
        ops.scatter_add(t(np.zeros((4, 3), np.float32)), t(np.array([0, 1], np.int32)),
                        t(np.zeros((2, 4), np.float32)))
    with pytest.raises(TypeError, match=r"\[scatter_add\] indices takes an int32 or int64 tensor"):
        ops.scatter_add(t(np.zeros((4,), np.float32)), t(np.array([0.5], np.float32)), t(np.zeros((1,), np.float32)))


@pytest.mark.parametrize("x_shape,idx_shape", [((6,), (5, 1)), ((4, 5), (7, 2)), ((4, 5, 3), (2, 3, 1)),
                                               ((3, 4, 2), (6, 2)), ((3, 4, 2), (5, 3))])
def test_tensor_scatter_add(device, x_shape, idx_shape):
    n = idx_shape[-1]
    x = RNG.standard_normal(x_shape).astype(np.float32)
    idx = np.stack([RNG.integers(0, x_shape[d], idx_shape[:-1]) for d in range(n)], -1).astype(np.int32)
    upd = RNG.standard_normal(idx_shape[:-1] + x_shape[n:]).astype(np.float32)
    got = ops.tensor_scatter_add(t(x), t(idx), t(upd))
    np.testing.assert_allclose(got.asnumpy(), ref_tensor_scatter_add(x, idx, upd), rtol=1e-6, atol=1e-6)


def test_tensor_scatter_add_out_of_range_positions_never_alias():
    # In a (3, 4) input, (0, 5) and (1, -5) would land on (1, 1) and (0, 3) if the two indices were
    # simply combined into one row-major position: they must add nothing. (-1, -3) is (2, 1), as in
    # NumPy.
    x = np.zeros((3, 4), np.float32)
    idx = np.array([[0, 5], [1, -5], [3, 0], [2, 3], [2, 3], [-1, -3]], np.int64)
    upd = np.array([10, 20, 30, 1, 2, 7], np.float32)
    got = ops.tensor_scatter_add(t(x), t(idx), t(upd)).asnumpy()
    want = np.zeros((3, 4), np.float32)
    want[2, 3] = 3
    want[2, 1] = 7
    np.testing.assert_array_equal(got, want)


def test_tensor_scatter_add_gradients():
    idx = np.array([[0, 1], [2, 0], [0, 1]], np.int32)
    w = RNG.standard_normal((3, 2, 2)).astype(np.float32)

    def f(x, u):
        return (ops.tensor_scatter_add(x, t(idx), u) * t(w)).sum()

    gx, gu = spora.grad(f, grad_position=(0, 1))(t(np.zeros((3, 2, 2), np.float32)), t(np.ones((3, 2), np.float32)))
    np.testing.assert_allclose(gx.asnumpy(), w)
    np.testing.assert_allclose(gu.asnumpy(), w[idx[:, 0], idx[:, 1]])


def test_tensor_scatter_add_compiles():
    idx = t(np.array([[1], [1], [0]], np.int32))

    @spora.jit
    def f(x, u):
        return ops.tensor_scatter_add(x, idx, u)

    got = f(t(np.zeros((2, 3), np.float32)), t(np.ones((3, 3), np.float32)))
    np.testing.assert_array_equal(got.asnumpy(), [[1, 1, 1], [2, 2, 2]])


def test_tensor_scatter_add_errors():
    x = t(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"\[tensor_scatter_add\] indices must have shape \(\.\.\., N\) with "
                                         r"1 <= N <= input_x's rank 2, got \(2, 3\)"):
        ops.tensor_scatter_add(x, t(np.zeros((2, 3), np.int32)), t(np.zeros((2,), np.float32)))
    with pytest.raises(ValueError, match=r"\[tensor_scatter_add\] updates must have shape indices.shape\[:-1\] \+ "
                                         r"input_x.shape\[1:\] = \(2, 4\).*got \(2,\)"):
        ops.tensor_scatter_add(x, t(np.zeros((2, 1), np.int32)), t(np.zeros((2,), np.float32)))
    with pytest.raises(TypeError, match=r"\[tensor_scatter_add\] updates must have input_x's dtype float32"):
        ops.tensor_scatter_add(x, t(np.zeros((2, 2), np.int32)), t(np.zeros((2,), np.int32)))
