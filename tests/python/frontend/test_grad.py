"""spora.grad / value_and_grad against central finite differences in
float64: grad_position variants, weights, has_aux, higher order,
stop_gradient, Python control flow (PyNative), and the same in graph mode."""
import numpy as np
import pytest

import spora
from spora import ops

RNG = np.random.default_rng(1)


def fd(f, xs, i, eps=1e-6):
    """d f(*xs) / d xs[i] by central differences (f returns a float)."""
    x = xs[i]
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi = [a.copy() for a in xs]
        lo = [a.copy() for a in xs]
        hi[i][k] += eps
        lo[i][k] -= eps
        g[k] = (f(*hi) - f(*lo)) / (2 * eps)
    return g


def loss_np(x, w):
    return float(np.sum(np.tanh(x @ w) ** 2) + np.sum(x * x) * 0.1)


def loss(x, w):
    return ((x @ w).tanh() ** 2).sum() + (x * x).sum() * 0.1


X = RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 2))


@pytest.fixture(params=["pynative", "graph"])
def mode(request):
    spora.set_context(mode=spora.PYNATIVE_MODE if request.param == "pynative" else spora.GRAPH_MODE)
    return request.param


def test_grad_position_int(mode):
    g = spora.grad(loss)(spora.Tensor(X), spora.Tensor(W))
    assert isinstance(g, spora.Tensor) and g.shape == X.shape
    np.testing.assert_allclose(g.asnumpy(), fd(loss_np, [X, W], 0), rtol=1e-6, atol=1e-8)


def test_grad_position_tuple_and_value(mode):
    v, (gx, gw) = spora.value_and_grad(loss, grad_position=(0, 1))(spora.Tensor(X), spora.Tensor(W))
    assert v.item() == pytest.approx(loss_np(X, W), rel=1e-12)
    np.testing.assert_allclose(gx.asnumpy(), fd(loss_np, [X, W], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw.asnumpy(), fd(loss_np, [X, W], 1), rtol=1e-6, atol=1e-8)


def test_weights_and_positions(mode):
    w = spora.Parameter(W, name="w")

    def f(x):
        return loss(x, w)

    gw = spora.grad(f, grad_position=None, weights=[w])(spora.Tensor(X))
    assert isinstance(gw, tuple) and len(gw) == 1
    np.testing.assert_allclose(gw[0].asnumpy(), fd(loss_np, [X, W], 1), rtol=1e-6, atol=1e-8)
    gx, (gw2,) = spora.grad(f, grad_position=0, weights=[w])(spora.Tensor(X))
    np.testing.assert_allclose(gx.asnumpy(), fd(loss_np, [X, W], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw2.asnumpy(), gw[0].asnumpy(), rtol=1e-12)


def test_has_aux(mode):
    def f(x, w):
        y = x @ w
        return (y.tanh() ** 2).sum() + (x * x).sum() * 0.1, y * 2

    g, (aux,) = spora.grad(f, has_aux=True)(spora.Tensor(X), spora.Tensor(W))
    np.testing.assert_allclose(g.asnumpy(), fd(loss_np, [X, W], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(aux.asnumpy(), (X @ W) * 2, rtol=1e-12)
    (v, aux2), g2 = spora.value_and_grad(f, has_aux=True)(spora.Tensor(X), spora.Tensor(W))
    assert v.item() == pytest.approx(loss_np(X, W))
    np.testing.assert_allclose(aux2.asnumpy(), aux.asnumpy())
    np.testing.assert_allclose(g2.asnumpy(), g.asnumpy())


def test_non_scalar_output_is_summed():
    g = spora.grad(lambda x: x * x)(spora.Tensor(X))
    np.testing.assert_allclose(g.asnumpy(), 2 * X, rtol=1e-12)


def test_higher_order_by_nesting(mode):
    def f(x):
        return (x ** 3).sum() + x.sin().sum()

    x = np.array([0.3, -1.2, 2.0])
    d1 = spora.grad(f)
    d2 = spora.grad(d1)
    d3 = spora.grad(d2)
    np.testing.assert_allclose(d1(spora.Tensor(x)).asnumpy(), 3 * x ** 2 + np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(d2(spora.Tensor(x)).asnumpy(), 6 * x - np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(d3(spora.Tensor(x)).asnumpy(), 6 - np.cos(x), rtol=1e-12)


def test_stop_gradient(mode):
    def f(x):
        return (x * ops.stop_gradient(x)).sum()

    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(spora.grad(f)(spora.Tensor(x)).asnumpy(), x, rtol=1e-12)


def test_python_control_flow_in_pynative():
    def f(x):
        if x.sum() > 0:  # needs the value: fine in PyNative
            return (x * x).sum()
        return (x * 3).sum()

    np.testing.assert_allclose(spora.grad(f)(spora.Tensor(np.array([1.0, 2.0]))).asnumpy(), [2.0, 4.0])
    np.testing.assert_allclose(spora.grad(f)(spora.Tensor(np.array([-1.0, -2.0]))).asnumpy(), [3.0, 3.0])


def test_grad_through_indexing_and_reductions():
    a = RNG.standard_normal((4, 5))

    def f(x):
        return (x[1:, ::2] ** 2).sum() + x.max(axis=1).sum() + x[[0, 2]].mean()

    def f_np(x):
        return float((x[1:, ::2] ** 2).sum() + x.max(axis=1).sum() + x[[0, 2]].mean())

    np.testing.assert_allclose(spora.grad(f)(spora.Tensor(a)).asnumpy(), fd(f_np, [a], 0), rtol=1e-6, atol=1e-8)


def test_grad_of_setitem():
    def f(x):
        y = x * 1.0
        y[0] = 5.0
        return (y * y).sum()

    a = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(spora.grad(f)(spora.Tensor(a)).asnumpy(), [0.0, 4.0, 6.0])


def test_grad_errors():
    with pytest.raises(TypeError, match="floating-point"):
        spora.grad(lambda x: x.sum())(spora.Tensor([1, 2]))
    with pytest.raises(ValueError, match="grad_position"):
        spora.grad(lambda x: x.sum(), grad_position=3)(spora.Tensor([1.0]))
    with pytest.raises(ValueError, match="has_aux"):
        spora.grad(lambda x: x.sum(), has_aux=True)(spora.Tensor([1.0]))


def test_assign_inside_grad_is_applied():
    state = spora.Parameter(np.zeros(2), name="state")

    def f(x):
        state.assign_value(state + x)
        return (x * x).sum()

    g = spora.grad(f)(spora.Tensor(np.array([1.0, 2.0])))
    np.testing.assert_allclose(g.asnumpy(), [2.0, 4.0])
    np.testing.assert_allclose(state.asnumpy(), [1.0, 2.0])


def test_vs_torch_when_installed():
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    w = torch.tensor(W)
    (((x @ w).tanh() ** 2).sum() + (x * x).sum() * 0.1).backward()
    g = spora.grad(loss)(spora.Tensor(X), spora.Tensor(W))
    np.testing.assert_allclose(g.asnumpy(), x.grad.numpy(), rtol=1e-10)
