"""One compiled executable runs inputs of other shapes (same dtype and rank)
through the C API: the last, smaller batch of an epoch. Numbers against
numpy on every device; signatures the graph cannot take fail naming the op
and the source line."""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
F32 = S.DTYPE_F32


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def classifier(batch):
    """log_softmax(relu(x @ w^T + b)) and its batch mean, built for `batch`."""
    g = S.Graph("classifier")
    x = g.input("x", F32, [batch, 5])
    w = g.weight("w", F32, [3, 5])
    b = g.weight("b", F32, [3])
    h = g.op("linear", [x, w, b], file="model.py", line=2)[0]
    y = g.op("log_softmax", [g.op("relu", [h], file="model.py", line=3)[0]], {"axis": -1}, file="model.py", line=4)[0]
    g.set_outputs([y, g.op("mean", [y], {"axes": [0]}, file="model.py", line=5)[0]])
    return g


def reference(x, w, b):
    h = np.maximum(x @ w.T + b, 0)
    y = h - np.log(np.exp(h - h.max(-1, keepdims=True)).sum(-1, keepdims=True)) - h.max(-1, keepdims=True)
    return y, y.mean(0)


def test_batches_of_other_sizes_run_on_one_executable(dev):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    exe = classifier(32).compile(dev)
    memory = exe.memory()
    wt, bt = S.Tensor.from_numpy(dev, w), S.Tensor.from_numpy(dev, b)
    for batch in (32, 7, 32, 7, 1):
        x = rng.standard_normal((batch, 5)).astype(np.float32)
        y, m = exe.run([S.Tensor.from_numpy(dev, x), wt, bt], 2)
        want_y, want_m = reference(x, w, b)
        assert y.numpy().shape == (batch, 3)
        np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(m.numpy(), want_m, rtol=1e-5, atol=1e-5)
    assert exe.memory() == memory  # the figures of the graph as built


def test_signatures_the_graph_cannot_take_name_the_op_and_line(dev):
    exe = classifier(8).compile(dev)
    w = S.Tensor.from_numpy(dev, np.zeros((3, 5), np.float32))
    b = S.Tensor.from_numpy(dev, np.zeros(3, np.float32))
    with pytest.raises(S.SporaError) as e:
        exe.run([S.Tensor.from_numpy(dev, np.zeros(40, np.float32)), w, b], 2)
    assert e.value.status == S.ERROR_INVALID_ARGUMENT
    assert "input 'x' must be f32 (8,5) (or another shape of that rank), got f32 (40,)" in e.value.message
    with pytest.raises(S.SporaError) as e:
        exe.run([S.Tensor.from_numpy(dev, np.zeros((8, 6), np.float32)), w, b], 2)
    assert e.value.message.startswith("[linear]") and "(model.py:2)" in e.value.message, e.value.message
    # The executable still runs the signatures it can take.
    y, _ = exe.run([S.Tensor.from_numpy(dev, np.ones((2, 5), np.float32)), w, b], 2)
    np.testing.assert_allclose(y.numpy(), np.full((2, 3), -np.log(3), np.float32), rtol=1e-5)
