"""Recomputation on 2 and 4 ranks (docs/parallel.md, "Recomputation"), run
by ctest under `mpirun -np 2` and `-np 4` with the other files of this
directory (mpi_python_semi_auto_2 / _4; every test is collective).

A small transformer of three encoder blocks, each marked with
Cell.recompute(), trained under semi_auto_parallel (heads and feed-forward
split over the ranks, Megatron's layout), auto_parallel (no strategies; the
search plans it, with and without a memory limit) and data_parallel (each
rank its rows of the batch, gradients averaged), ends with the same losses
and weights as the unmarked transformer trained in one process, within
rtol 1e-5. The memory each rank holds for the training (weights, optimizer
state, the compiled step's arena: measured with spora.runtime.memory_allocated)
drops with recompute, and under auto_parallel the drop is printed beside the
planner's estimate (the plan's weight_bytes + activation_bytes), which
drops too, by about as much."""
import gc

import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import nn, ops, runtime
from spora import _spmd

B, S, D, H, F, BLOCKS = 4, 8, 16, 4, 64, 3


class Block(nn.Cell):
    """A post-LN encoder block from primitives: 4-head self-attention and a
    feed-forward pair, both residual. With n > 1 the q/k/v projections and
    the first feed-forward matmul are split by columns, the output
    projection and the second by rows, the attention by heads."""

    def __init__(self, seed, n=1):
        super().__init__()
        rng = np.random.default_rng(seed)

        def p(shape, name):
            return spora.Parameter(spora.Tensor((rng.standard_normal(shape) * 0.3).astype(np.float32)),
                                   name=f"{name}_{seed}")

        self.wq, self.wk, self.wv, self.wo = p((D, D), "wq"), p((D, D), "wk"), p((D, D), "wv"), p((D, D), "wo")
        self.w1, self.w2 = p((D, F), "w1"), p((F, D), "w2")
        self.gamma = spora.Parameter(spora.Tensor(np.ones(D, np.float32)), name=f"gamma_{seed}")
        self.beta = spora.Parameter(spora.Tensor(np.zeros(D, np.float32)), name=f"beta_{seed}")
        self.q, self.k, self.v, self.o = ops.MatMul(), ops.MatMul(), ops.MatMul(), ops.MatMul()
        self.scores, self.context = ops.BatchMatMul(), ops.BatchMatMul()
        self.ff1, self.ff2 = ops.MatMul(), ops.MatMul()
        if n > 1:
            cols, rows, heads = ((1, 1), (1, n)), ((1, n), (n, 1)), ((1, n, 1, 1), (1, n, 1, 1))
            for op in (self.q, self.k, self.v, self.ff1):
                op.shard(cols)
            for op in (self.o, self.ff2):
                op.shard(rows)
            self.scores.shard(heads)
            self.context.shard(heads)

    def _heads(self, t, b):
        return t.reshape(b, S, H, D // H).transpose(0, 2, 1, 3)

    def construct(self, x):
        b = x.shape[0]
        x2 = x.reshape(b * S, D)
        q, k, v = (self._heads(mm(x2, w), b) for mm, w in ((self.q, self.wq), (self.k, self.wk), (self.v, self.wv)))
        att = ops.softmax(self.scores(q, k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(D // H)), -1)
        ctx = self.context(att, v).transpose(0, 2, 1, 3).reshape(b * S, D)
        h = ops.layer_norm(x2 + self.o(ctx, self.wo), (D,), self.gamma, self.beta)
        return (h + self.ff2(ops.relu(self.ff1(h, self.w1)), self.w2)).reshape(b, S, D)


class Transformer(nn.Cell):
    def __init__(self, recompute, n=1):
        super().__init__()
        self.blocks = nn.CellList([Block(5 + i, n) for i in range(BLOCKS)])
        if recompute:
            for blk in self.blocks:
                blk.recompute()

    def construct(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


def data(batch=B, steps=4):
    rng = np.random.default_rng(21)
    return [(rng.standard_normal((batch, S, D)).astype(np.float32),
             rng.standard_normal((batch, S, D)).astype(np.float32)) for _ in range(steps)]


class Run:
    """One training run: losses, the network, the compiled step, the step's
    planned arena bytes and the bytes the run holds on this rank."""


def fit(make_net, batches, reduce_grads=False):
    """Builds the network and its optimizer and trains them, one compiled
    step per batch. `held` is memory_allocated() after training minus before
    the network existed: this rank's weights, optimizer state, the step's
    arena (allocated with the executable, reused every step) and its last
    outputs."""
    gc.collect()
    before = runtime.memory_allocated()
    run = Run()
    run.net = net = make_net()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    reducer = nn.DistributedGradReducer(opt.parameters, mean=True) if reduce_grads else None
    loss_fn = nn.MSELoss()
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    @spora.jit
    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(reducer(grads) if reducer is not None else grads)
        return loss

    run.losses = [float(step(spora.Tensor(x), spora.Tensor(y)).asnumpy()) for x, y in batches]
    run.held = runtime.memory_allocated() - before
    assert step.stats["traces"] == 1
    (entry,) = step._cache.values()
    run.arena = entry.exe.memory()[0]
    run.step, run.opt = step, opt
    run.copies = step.last_graph.text().count("recompute=0")  # ops the recompute pass copied
    return run


def check_equal(ref, run):
    np.testing.assert_allclose(run.losses, ref.losses, rtol=1e-5, atol=1e-6)
    assert abs(run.losses[-1] - run.losses[0]) > 1e-3  # it trained
    for p_ref, p in zip(ref.net.trainable_params(), run.net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)


def report(what, plain, marked, extra=""):
    if comm.get_rank() == 0:
        print(f"\n[recompute {comm.get_group_size()} ranks, {what}] per rank: held {plain.held} -> {marked.held} B "
              f"(step arena {plain.arena} -> {marked.arena} B, {marked.copies} ops copied){extra}")


def one_process(batches):
    return fit(lambda: Transformer(False), batches)


def test_semi_auto_megatron_transformer_with_recompute_equals_one_process():
    n = comm.get_group_size()
    if H % n:
        pytest.skip(f"{H} heads do not split over {n} ranks")
    batches = data()
    ref = one_process(batches)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    plain = fit(lambda: Transformer(False, n), batches)
    marked = fit(lambda: Transformer(True, n), batches)
    check_equal(ref, plain)
    check_equal(ref, marked)
    blk = marked.net.blocks[0]
    assert blk.wq.asnumpy().shape == (D, D // n) and blk.w2.asnumpy().shape == (F // n, D)
    # The copies survive the SPMD pass and the O1 pipeline (CSE does not fold
    # them back): the arena, and with it what the rank holds, is smaller.
    assert plain.copies == 0 and marked.copies > 0
    assert marked.arena < plain.arena < ref.arena, (ref.arena, plain.arena, marked.arena)
    assert plain.held - marked.held == plain.arena - marked.arena, (plain.held, marked.held)
    report("semi_auto_parallel, Megatron", plain, marked, f"; one process {ref.held} B (arena {ref.arena} B)")


def test_data_parallel_transformer_with_recompute_equals_one_process():
    n = comm.get_group_size()
    r = comm.get_rank()
    # A batch of 32: each rank's activations (16 or 8 rows) outweigh the
    # gradients and their all-reduce bucket, which make the step's peak
    # when the rows are few (recompute cannot lower that).
    batches = data(32)
    ref = one_process(batches)
    rows = 32 // n
    mine = [(x[r * rows:(r + 1) * rows], y[r * rows:(r + 1) * rows]) for x, y in batches]
    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    plain = fit(lambda: Transformer(False), mine, reduce_grads=True)
    marked = fit(lambda: Transformer(True), mine, reduce_grads=True)
    for run in (plain, marked):  # each rank's loss is its rows' mean: the batch's is the mean over ranks
        every = comm.all_gather(spora.Tensor(np.array(run.losses, np.float32))).asnumpy()
        run.losses = every.reshape(n, -1).mean(0).tolist()
    check_equal(ref, plain)
    check_equal(ref, marked)
    assert "all_reduce(" in marked.step.last_graph.text()
    assert plain.copies == 0 and marked.copies > 0
    assert marked.arena < plain.arena < ref.arena, (ref.arena, plain.arena, marked.arena)
    assert plain.held - marked.held == plain.arena - marked.arena, (plain.held, marked.held)
    report("data_parallel", plain, marked, f"; one process {ref.held} B (arena {ref.arena} B)")


def planned(run):
    p = run.step.last_plan["plan"]
    return p["weight_bytes"], p["activation_bytes"], p["memory_bytes"]


def test_auto_parallel_transformer_with_recompute_memory_drops_as_planned(monkeypatch):
    """The search plans the step with the recompute pass's copies in it: its
    activation estimate (live op outputs in graph order) drops by about what
    the compiled step's arena drops, and its per-device total stays close to
    what the rank measurably holds. Then under a memory limit below what
    even the recomputed plan needs, the search splits weights and the
    recomputed training still equals one process.

    Gradient all-reduce buckets (passes/allreduce_fusion.cpp) are off here:
    a bucket concatenates the gradients into one buffer at the end of the
    step, which at this model's size is the step's peak and hides the
    backward pass's (the planner does not model the bucket's copy)."""
    monkeypatch.setenv("SPORA_ALLREDUCE_BUCKET_MB", "0")
    n = comm.get_group_size()
    batches = data()
    ref = one_process(batches)
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n)
    plain = fit(lambda: Transformer(False), batches)
    marked = fit(lambda: Transformer(True), batches)
    check_equal(ref, plain)
    check_equal(ref, marked)
    assert plain.copies == 0 and marked.copies > 0
    (w0, a0, m0), (w1, a1, m1) = planned(plain), planned(marked)
    measured_drop, planned_drop = plain.held - marked.held, m0 - m1
    report("auto_parallel", plain, marked,
           f"\n  planner's estimate per device: {m0:.0f} -> {m1:.0f} B (weights {w0:.0f} -> {w1:.0f}, "
           f"activations {a0:.0f} -> {a1:.0f}); drop measured {measured_drop} B, planned {planned_drop:.0f} B "
           f"({planned_drop / measured_drop:.3f}x); planned / measured total {m0 / plain.held:.3f} without, "
           f"{m1 / marked.held:.3f} with recompute")
    assert measured_drop > 0 and measured_drop == plain.arena - marked.arena
    assert planned_drop > 0 and w1 == w0  # recompute changes activations only
    # The planner prices each op output alive from its op to its last
    # reader; the arena packs the same values with in-place reuse and
    # alignment: the two drops agree within 10%, the totals within 10%.
    assert abs(planned_drop - measured_drop) <= 0.1 * measured_drop, (planned_drop, measured_drop)
    assert abs(m0 - plain.held) <= 0.1 * plain.held and abs(m1 - marked.held) <= 0.1 * marked.held

    # A limit below the recomputed plan's need: the search splits more
    # (weights or activations) and the rank measurably holds less.
    limit = 0.8 * m1
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n, memory_limit=limit)
    small = fit(lambda: Transformer(True), batches)
    check_equal(ref, small)
    w2, a2, m2 = planned(small)
    assert small.step.last_plan["plan"]["fits"] and m2 <= limit, _spmd.describe(small.step.last_plan)
    assert small.copies > 0 and small.held < marked.held
    assert abs(m2 - small.held) <= 0.1 * small.held, (m2, small.held)
    if comm.get_rank() == 0:
        print(f"  under memory_limit {limit:.0f} B with recompute: held {small.held} B (arena {small.arena} B), "
              f"planned {m2:.0f} B (weights {w2:.0f}, activations {a2:.0f}); planned / measured {m2 / small.held:.3f}")
