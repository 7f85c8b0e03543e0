"""Peak device memory of a compiled training step (issue 14: at most
PyTorch's). The updated weights and optimizer state overwrite the old ones
(spora_executable_run_donating) instead of being fresh outputs, so one step
holds parameters + gradients + optimizer state + the activations backward
keeps, not a second copy of the weights and state. Measured on sim, whose
memory statistics are exact; the step's numbers match eager training, and a
tensor still holding a weight's old value keeps it."""
import gc

import numpy as np

import spora
from spora import nn

W, B, CLASSES = 512, 16, 10


def _net(seed):
    rng = np.random.default_rng(seed)
    net = nn.SequentialCell(nn.Dense(W, W, activation="relu"), nn.Dense(W, W, activation="relu"),
                            nn.Dense(W, CLASSES))
    for p in net.trainable_params():
        p.set_data(spora.Tensor((rng.standard_normal(p.shape) * 0.05).astype(np.float32)))
    return net


def _step_fn(net, compiled):
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    return (spora.jit(step) if compiled else step), opt


def _batch():
    rng = np.random.default_rng(1)
    return (spora.Tensor(rng.standard_normal((B, W)).astype(np.float32)),
            spora.Tensor(rng.integers(0, CLASSES, B).astype(np.int64)))


def test_compiled_step_peak_is_params_grads_state_and_activations():
    spora.set_device("sim:0")
    rt = spora.runtime
    gc.collect()
    rt.synchronize()
    base = rt.memory_allocated()
    net = _net(0)
    step, opt = _step_fn(net, compiled=True)
    x, y = _batch()
    step(x, y).asnumpy()  # compiles; the plan's arena stays allocated
    rt.synchronize()
    rt.reset_peak_memory_stats()
    step(x, y).asnumpy()
    rt.synchronize()
    peak = rt.max_memory_allocated() - base
    params = sum(int(np.prod(p.shape)) * 4 for p in net.trainable_params())
    # Parameters, their gradients, one momentum buffer each; the batch; per
    # layer an activation kept for backward and its gradient, with room for
    # transients (8 batch-sized activations) and 256-byte alignment.
    act = B * W * 4
    bound = 3 * params + B * W * 4 + B * 8 + 8 * act + 64 * 256
    # Without in-place updates the step also holds a second copy of the
    # weights and momentum: 5 * params, far above the bound.
    assert 5 * params > bound + params
    assert peak <= bound, f"peak {peak} bytes above parameters + gradients + momentum + activations = {bound}"


def test_in_place_updates_match_eager_training():
    spora.set_device("sim:0")
    x, y = _batch()
    nets = {}
    for compiled in (True, False):
        net = _net(0)
        step, _ = _step_fn(net, compiled)
        for _ in range(3):
            step(x, y).asnumpy()
        nets[compiled] = [p.asnumpy() for p in net.trainable_params()]
    for a, b in zip(nets[True], nets[False]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_held_old_value_is_not_overwritten():
    spora.set_device("sim:0")
    net = _net(0)
    step, _ = _step_fn(net, compiled=True)
    x, y = _batch()
    step(x, y).asnumpy()
    w = net.trainable_params()[0]
    held = w._detach()  # shares the weight's tensor handle
    before = held.asnumpy().copy()
    step(x, y).asnumpy()
    np.testing.assert_array_equal(held.asnumpy(), before)
    assert not np.array_equal(w.asnumpy(), before), "the step updates the weight"
