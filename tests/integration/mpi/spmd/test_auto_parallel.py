"""auto_parallel (docs/parallel.md, "Strategy search"), run by ctest under
`mpirun -np 2` and `-np 4` with the other files of this directory (ctest
mpi_python_semi_auto_2 / _4; every test is collective).

The check: an MLP with a wide hidden layer and no strategies at all,
trained under auto_parallel with a per-device memory limit that replicated
weights do not fit, gets its weights split by the search and still ends
with the same weights and losses as the same MLP trained in one process;
the plan is printable with spora.parallel.describe_plan."""
import io
import json
import os
import tempfile

import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import nn, ops
from spora import _spmd

HIDDEN = 256




class MLP(nn.Cell):
    """32 -> HIDDEN -> 10; strategies only where the test gives them."""

    def __init__(self, s1=None):
        super().__init__()
        rng = np.random.default_rng(7)  # the same weights on every rank
        self.w1 = spora.Parameter(spora.Tensor((rng.standard_normal((32, HIDDEN)) * 0.2).astype(np.float32)), name="w1")
        self.b1 = spora.Parameter(spora.Tensor((rng.standard_normal(HIDDEN) * 0.1).astype(np.float32)), name="b1")
        self.w2 = spora.Parameter(spora.Tensor((rng.standard_normal((HIDDEN, 10)) * 0.2).astype(np.float32)), name="w2")
        self.b2 = spora.Parameter(spora.Tensor((rng.standard_normal(10) * 0.1).astype(np.float32)), name="b2")
        self.mm1 = ops.MatMul().shard(s1) if s1 else ops.MatMul()
        self.mm2 = ops.MatMul()
        self.add1 = ops.Add()
        self.add2 = ops.Add()
        self.relu = ops.ReLU()

    def construct(self, x):
        h = self.relu(self.add1(self.mm1(x, self.w1), self.b1))
        return self.add2(self.mm2(h, self.w2), self.b2)


def batches(n_steps=6, batch=16):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    y = (np.abs(x[:, :10]).argmax(axis=1)).astype(np.int32)
    return [(x[i * batch % 64:(i * batch % 64) + batch], y[i * batch % 64:(i * batch % 64) + batch])
            for i in range(n_steps)]


def train(net, steps_data, lr=0.1):
    opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    @spora.jit
    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    losses = [float(step(spora.Tensor(x), spora.Tensor(y)).asnumpy()) for x, y in steps_data]
    return losses, step


def check_equal(ref, ref_losses, net, losses):
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    assert abs(losses[-1] - losses[0]) > 1e-3  # it trained
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)


def test_auto_parallel_search_splits_a_wide_mlp_under_a_memory_limit():
    n = comm.get_group_size()
    assert n >= 2, "run under mpirun -np 2 or 4"
    data = batches()
    ref = MLP()
    ref_losses, _ = train(ref, data)

    # Unlimited memory: the plan the search prefers, and what it needs.
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="dynamic_programming", device_num=n)
    free_net = MLP()
    free_losses, free_step = train(free_net, data[:1])
    need = free_step.last_plan["plan"]["memory_bytes"]
    weights = free_step.last_plan["plan"]["weight_bytes"]
    assert free_step.last_plan["plan"]["fits"]

    # 30% of the weights' bytes (with their momentum) less than the unlimited
    # plan needs: only splitting weights can make that up.
    limit = need - 0.3 * weights
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="dynamic_programming", device_num=n,
                                    memory_limit=limit)
    net = MLP()
    losses, step = train(net, data)
    plan = step.last_plan["plan"]
    assert plan["fits"], _spmd.describe(step.last_plan)
    assert plan["memory_bytes"] <= limit < need
    # The widest weight is split: each rank holds 1/N of w1.
    assert net.w1.asnumpy().size * n == 32 * HIDDEN, _spmd.describe(step.last_plan)
    assert plan["weight_bytes"] < weights
    assert net.w1.shape == (32, HIDDEN)
    check_equal(ref, ref_losses, net, losses)

    # The plan is saved in the checkpoint's header.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"rank{comm.get_rank()}.ckpt")
        spora.save_checkpoint(net, path)
        saved = json.loads(spora.load_checkpoint_metadata(path)["parallel_plan"])
        assert saved["plan"]["step_time_s"] == plan["step_time_s"]
        assert [w["layout"] for w in saved["weights"]] == [w["layout"] for w in step.last_plan["weights"]]

    out = io.StringIO()
    text = spora.parallel.describe_plan(net, file=out)
    assert out.getvalue().strip() == text.strip()
    assert "search dynamic_programming: estimated step" in text, text
    assert "memory per device" in text and "fits in" in text, text
    assert "matmul strategy" in text, text
    assert "weight w1: (32, 256)" in text, text


def test_auto_parallel_sharding_propagation_follows_the_annotated_op():
    n = comm.get_group_size()
    data = batches()
    ref = MLP()
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation", device_num=n)
    net = MLP(s1=((1, 1), (1, n)))  # only the first matmul is annotated
    losses, step = train(net, data)
    assert net.w1.asnumpy().shape == (32, HIDDEN // n)
    assert net.b1.asnumpy().shape == (HIDDEN // n,)  # followed by propagation
    assert "plan" not in step.last_plan  # no search ran
    check_equal(ref, ref_losses, net, losses)


def test_unknown_search_mode_is_an_error():
    with pytest.raises(ValueError, match="search_mode 'greedy' is not supported"):
        spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="greedy")
    with pytest.raises(ValueError, match="topology has unknown keys"):
        spora.set_auto_parallel_context(topology={"bandwidth": 1})


class Block(nn.Cell):
    """One encoder block from primitives without any strategy: 4-head
    self-attention, residual, layer norm, feed-forward pair."""

    B, S, D, H, F = 4, 8, 16, 4, 32

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(5)
        D, F = self.D, self.F

        def p(shape, name):
            return spora.Parameter(spora.Tensor((rng.standard_normal(shape) * 0.3).astype(np.float32)), name=name)

        self.wq, self.wk, self.wv, self.wo = p((D, D), "wq"), p((D, D), "wk"), p((D, D), "wv"), p((D, D), "wo")
        self.w1, self.w2 = p((D, F), "w1"), p((F, D), "w2")
        self.gamma = spora.Parameter(spora.Tensor(np.ones(D, np.float32)), name="gamma")
        self.beta = spora.Parameter(spora.Tensor(np.zeros(D, np.float32)), name="beta")
        self.mm = ops.MatMul()
        self.bmm = ops.BatchMatMul()
        self.relu = ops.ReLU()

    def _heads(self, t):
        return t.reshape(self.B, self.S, self.H, self.D // self.H).transpose(0, 2, 1, 3)

    def construct(self, x):
        B, S, D = self.B, self.S, self.D
        x2 = x.reshape(B * S, D)
        q, k, v = (self._heads(self.mm(x2, w)) for w in (self.wq, self.wk, self.wv))
        att = ops.softmax(self.bmm(q, k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(D // self.H)), -1)
        ctx = self.bmm(att, v).transpose(0, 2, 1, 3).reshape(B * S, D)
        h = ops.layer_norm(x2 + self.mm(ctx, self.wo), (D,), self.gamma, self.beta)
        return (h + self.mm(self.relu(self.mm(h, self.w1)), self.w2)).reshape(B, S, D)


def test_auto_parallel_transformer_block_equals_single_process():
    """The search plans a whole attention block's training step (no
    strategies), unconstrained and under a memory limit below what the
    unconstrained plan needs; both train equal to one process."""
    n = comm.get_group_size()
    rng = np.random.default_rng(21)
    data = [(rng.standard_normal((Block.B, Block.S, Block.D)).astype(np.float32),
             rng.standard_normal((Block.B, Block.S, Block.D)).astype(np.float32)) for _ in range(4)]

    def fit(net):
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
        loss_fn = nn.MSELoss()
        grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

        @spora.jit
        def step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss
        return [float(step(spora.Tensor(x), spora.Tensor(y)).asnumpy()) for x, y in data], step

    ref = Block()
    ref_losses, _ = fit(ref)
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n)
    net = Block()
    losses, step = fit(net)
    check_equal(ref, ref_losses, net, losses)
    need = step.last_plan["plan"]["memory_bytes"]

    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n, memory_limit=0.8 * need)
    net = Block()
    losses, step = fit(net)
    plan = step.last_plan["plan"]
    assert plan["fits"] and plan["memory_bytes"] <= 0.8 * need, _spmd.describe(step.last_plan)
    assert any(w["local_shape"] != w["shape"] for w in step.last_plan["weights"])  # something is split
    check_equal(ref, ref_losses, net, losses)


def test_describe_plan_of_a_model_trained_in_graph_mode():
    n = comm.get_group_size()
    from spora.train import Model
    from spora.dataset import NumpySlicesDataset
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n)
    net = MLP()
    x, y = batches(1, 64)[0]
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.1, 0.9))
    model.train(1, NumpySlicesDataset((x, y), shuffle=False).batch(16))
    text = spora.parallel.describe_plan(model, file=io.StringIO())
    assert "search dynamic_programming: estimated step" in text, text
    with pytest.raises(ValueError, match="no partition plan for MLP"):
        spora.parallel.describe_plan(MLP())
