"""Recomputation (issue 16): Cell.recompute() and Primitive.recompute().
A compiled training step of an MLP and of a small transformer encoder whose
blocks are marked trains exactly as the unmarked one (losses and weights
after a few SGD/Adam steps), while the memory plan of the compiled step
(planned arena bytes, spora_executable_memory) is lower; the marks reach
the IR, the core copies the marked ops into the backward pass, and bad
arguments are errors."""
import re

import numpy as np
import pytest

import spora
from spora import nn, ops

B, D, H, BLOCKS = 512, 64, 256, 4


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(D, H)
        self.fc2 = nn.Dense(H, D)
        self.act = nn.GELU()

    def construct(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class MLP(nn.Cell):
    def __init__(self, recompute):
        super().__init__()
        self.blocks = nn.CellList([Block() for _ in range(BLOCKS)])
        self.head = nn.Dense(D, 10)
        if recompute:
            for b in self.blocks:
                b.recompute()

    def construct(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Encoder(nn.Cell):
    """Two post-norm transformer encoder layers (self-attention, feed-forward,
    dropout) over (batch, seq, 32), mean-pooled into 10 classes."""

    def __init__(self, recompute, dropout):
        super().__init__()
        self.layers = nn.CellList([nn.TransformerEncoderLayer(32, 4, dim_feedforward=128, dropout=dropout,
                                                              activation="gelu", batch_first=True)
                                   for _ in range(2)])
        self.head = nn.Dense(32, 10)
        if recompute:
            for layer in self.layers:
                layer.recompute()

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))


def _train(make_net, x, y, steps=3, optimizer="sgd"):
    """Trains a freshly seeded network `steps` compiled steps; returns the
    losses, the weights after, the planned arena bytes of the step and the
    step's optimised graph text."""
    nn.init.set_seed(7)
    net = make_net()
    net.set_train()
    loss_fn = nn.CrossEntropyLoss()
    params = net.trainable_params()
    opt = nn.SGD(params, 0.05, momentum=0.9) if optimizer == "sgd" else nn.Adam(params, 1e-3)
    grad_fn = spora.value_and_grad(lambda a, b: loss_fn(net(a), b), grad_position=None, weights=opt.parameters)

    @spora.jit
    def step(a, b):
        loss, grads = grad_fn(a, b)
        opt(grads)
        return loss

    losses = [float(step(x, y).asnumpy()) for _ in range(steps)]
    assert step.stats["traces"] == 1
    (entry,) = step._cache.values()
    planned, _ = entry.exe.memory()
    return losses, [p.asnumpy() for p in net.trainable_params()], planned, step.last_graph.text()


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (spora.Tensor(rng.standard_normal(shape).astype(np.float32)),
            spora.Tensor(rng.integers(0, 10, shape[0]).astype(np.int64)))


def _same_training(plain, marked):
    np.testing.assert_allclose(marked[0], plain[0], rtol=1e-6, atol=1e-6)
    for a, b in zip(marked[1], plain[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_recomputed_mlp_trains_the_same_with_a_lower_planned_peak():
    x, y = _data((B, D))
    plain = _train(lambda: MLP(False), x, y)
    marked = _train(lambda: MLP(True), x, y)
    _same_training(plain, marked)
    print(f"\n[recompute] MLP of {BLOCKS} blocks ({B}x{D}, hidden {H}): planned peak {plain[2]} bytes without "
          f"recompute, {marked[2]} with")
    # Each block's first Dense output and its GELU (B x H f32 each) are no
    # longer alive together in the backward pass: all but about one block's.
    # (The batch is large enough that activations, not the gradients that
    # wait for the optimizer at the end of the step, make the peak.)
    block_acts = 2 * B * H * 4
    assert marked[2] + (BLOCKS - 2) * block_acts <= plain[2], (plain[2], marked[2])
    assert "recompute=0" in marked[3] and "recompute=0" not in plain[3], "the copies the pass made"


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_recomputed_transformer_layers_train_the_same_with_a_lower_planned_peak(dropout):
    x, y = _data((8, 16, 32), seed=1)
    plain = _train(lambda: Encoder(False, dropout), x, y, optimizer="adam")
    marked = _train(lambda: Encoder(True, dropout), x, y, optimizer="adam")
    _same_training(plain, marked)
    print(f"\n[recompute] 2 transformer encoder layers (8x16x32, ff 128, dropout {dropout}): planned peak "
          f"{plain[2]} bytes without recompute, {marked[2]} with")
    assert marked[2] < plain[2], (plain[2], marked[2])


def test_model_training_in_graph_mode_with_recomputed_blocks_equals_plain():
    from spora.train import Model
    spora.set_context(mode=spora.GRAPH_MODE)
    x, y = _data((B, D))
    weights = []
    for recompute in (False, True):
        nn.init.set_seed(7)
        net = MLP(recompute)
        Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.05, momentum=0.9)).train(1, [(x, y)] * 3)
        weights.append([p.asnumpy() for p in net.trainable_params()])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_recomputed_primitive_is_copied_and_recompute_false_keeps_it():
    w = spora.Parameter(spora.Tensor(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)), name="w")
    x = spora.Tensor(np.linspace(0, 1, 32, dtype=np.float32).reshape(4, 8))

    def run(mode):
        mul = ops.Mul()
        tanh = ops.Tanh()
        if mode is not None:
            tanh.recompute(mode)
        grad_fn = spora.grad(lambda a: (tanh(mul(ops.matmul(a, w), 2.0)) ** 2).sum(), grad_position=None,
                             weights=[w])
        f = spora.jit(lambda a: grad_fn(a)[0])
        g = f(x).asnumpy()
        return g, f.last_graph.text()

    g0, t0 = run(None)
    g1, t1 = run(True)
    g2, t2 = run(False)
    np.testing.assert_array_equal(g1, g0)
    np.testing.assert_array_equal(g2, g0)
    # tanh's output is read by its own gradient and by pow's: copied once.
    assert t1.count("recompute=0") == 1, t1
    assert "recompute=0" not in t0
    assert "recompute=0" in t2 and t2.count("tanh") == t0.count("tanh"), "recompute(False) marks it 0, no copy"


def test_eager_calls_ignore_the_marks():
    x, y = _data((B, D))
    nn.init.set_seed(3)
    plain = MLP(False)
    nn.init.set_seed(3)
    marked = MLP(True)
    np.testing.assert_array_equal(marked(x).asnumpy(), plain(x).asnumpy())
    np.testing.assert_array_equal(ops.Tanh().recompute()(x).asnumpy(), ops.Tanh()(x).asnumpy())


def test_bad_arguments():
    with pytest.raises(TypeError, match="unknown keyword argument 'mode'"):
        Block().recompute(mode=True)
    with pytest.raises(TypeError, match="must be a bool"):
        Block().recompute(mp_comm_recompute=1)
    with pytest.raises(TypeError, match="must be a bool"):
        ops.Tanh().recompute("yes")
    Block().recompute(mp_comm_recompute=True, parallel_optimizer_comm_recompute=False)


def test_graph_marking_through_the_c_api():
    """Graph.num_nodes / mark_recompute (spora_graph_num_nodes,
    spora_graph_mark_recompute): the marks a traced Cell call leaves, and
    their errors."""
    from spora import _C
    g = _C.Graph("g")
    assert g.num_nodes() == 0
    with pytest.raises(ValueError, match=r"node range \[0, 5\) is outside graph 'g' of 0 nodes"):
        g.mark_recompute(0, 5, 2)
    with pytest.raises(ValueError, match="mark -1 is negative"):
        g.mark_recompute(0, 0, -1)
    block = Block()
    block.recompute()
    f = spora.jit(lambda a: block(a))
    f(spora.Tensor(np.ones((2, D), np.float32)))
    regions = {int(m) for m in re.findall(r"recompute=(\d+)", f.last_graph.text())}
    assert len(regions) == 1 and regions.pop() >= 2, "the block's ops carry one region number"
