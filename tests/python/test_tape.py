"""The eager tape through ctypes: gradients of eager ops against gradients
written out by hand in numpy (first and second order), on every device."""
import ctypes

import numpy as np
import pytest

import spora_capi as S


@pytest.fixture(scope="module", params=["cpu", "sim"])
def dev(request):
    ctx = S.Context()
    yield ctx.device_find(request.param)


def test_mlp_cross_entropy_gradients_match_numpy(dev):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 5))
    w1, b1 = rng.standard_normal((7, 5)) * 0.5, rng.standard_normal(7)
    w2, b2 = rng.standard_normal((3, 7)) * 0.5, rng.standard_normal(3)
    y = np.array([0, 2, 1, 1, 0, 2], dtype=np.int64)
    ts = [S.Tensor.from_numpy(dev, a) for a in (x, w1, b1, w2, b2)]
    ty = S.Tensor.from_numpy(dev, y)
    tape = S.Tape()
    with tape:
        h = S.run("linear", ts[0], ts[1], ts[2])
        z = S.run("linear", S.run("relu", h), ts[3], ts[4])
        loss = S.run("cross_entropy", z, ty)
    for t in ts:
        tape.watch(t)  # watching after use is fine: they are inputs of the tape
    grads = [g.numpy() for g in tape.gradient(loss, ts)]

    hv = x @ w1.T + b1
    a = np.maximum(hv, 0)
    zv = a @ w2.T + b2
    p = np.exp(zv - zv.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(y)
    assert float(loss.numpy()) == pytest.approx(-np.log(p[np.arange(n), y]).mean(), rel=1e-12)
    dz = (p - np.eye(3)[y]) / n
    dh = (dz @ w2) * (hv > 0)
    want = [dh @ w1, dh.T @ x, dh.sum(0), dz.T @ a, dz.sum(0)]
    for k, (g, w) in enumerate(zip(grads, want)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg=f"source {k}")


def test_nested_tapes_give_second_derivatives(dev):
    xv = np.array([0.3, -1.2, 0.8, 2.0])
    x = S.Tensor.from_numpy(dev, xv)
    outer, inner = S.Tape(), S.Tape()
    outer.watch(x)
    inner.watch(x)
    with outer:
        with inner:
            t = S.run("tanh", x)
            f = S.run("sum", S.run("mul", t, t))
        (g,) = inner.gradient(f, [x])
    (gg,) = outer.gradient(g, [x])
    th = np.tanh(xv)
    np.testing.assert_allclose(g.numpy(), 2 * th * (1 - th ** 2), rtol=1e-13)
    np.testing.assert_allclose(gg.numpy(), 2 * (1 - th ** 2) * (1 - 3 * th ** 2), rtol=1e-12, atol=1e-15)


def test_errors_name_the_problem(dev):
    x = S.Tensor.from_numpy(dev, np.ones(3))
    other = S.Tensor.from_numpy(dev, np.ones(3))
    tape = S.Tape()
    with pytest.raises(S.SporaError) as e:
        tape.stop()
    assert e.value.status == S.ERROR_INVALID_ARGUMENT and "not recording" in e.value.message
    with tape:
        y = S.run("exp", x)
    with pytest.raises(S.SporaError) as e:
        tape.gradient(y, [y, other])
    assert "source 1 is unknown to this tape" in e.value.message
    # A source location given to the op call ends its error message.
    bad = S.Tensor.from_numpy(dev, np.ones((2, 3)))
    out = (ctypes.c_void_p * 1)()
    ins = (ctypes.c_void_p * 2)(bad.handle, bad.handle)
    status = S.lib.spora_op_call_at(b"matmul", None, ins, 2, None, b"model.py", 17, out, 1)
    assert status == S.ERROR_INVALID_ARGUMENT
    assert S.last_error().endswith("(model.py:17)"), S.last_error()
