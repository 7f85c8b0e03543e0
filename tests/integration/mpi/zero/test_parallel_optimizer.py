"""Optimizer-state sharding (ZeRO; docs/parallel.md, "Optimizer-state
sharding (ZeRO)") on 2 and 4 ranks: data-parallel training with
enable_parallel_optimizer, each rank on its shard of every global batch
with gradients averaged, equals one process training on the whole batches
(an MLP with Momentum / Adam / AdamW, clipped or not; a small transformer
with AdamW), at optimizer_level level1 (state sharded) and level2
(gradients reduce-scattered too); each rank holds 1/N of the sharded state,
measured from the state Parameters' buffers against the formula; and
checkpoints hold the whole state."""
import numpy as np
import pytest

import spora
from spora import _zero, communication as comm
from spora import nn, ops
from spora.train import Model

GLOBAL_BATCH, STEPS = 16, 4


def global_batches(x_shape, y_shape, seed):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((GLOBAL_BATCH,) + x_shape).astype(np.float32),
             rng.standard_normal((GLOBAL_BATCH,) + y_shape).astype(np.float32)) for _ in range(STEPS)]


def rank_shard(batches):
    """This rank's contiguous rows of every global batch (equal sizes, so the
    mean of the ranks' mean losses is the global batch's mean loss)."""
    r, n = comm.get_rank(), comm.get_group_size()
    b = GLOBAL_BATCH // n
    return [(x[r * b:(r + 1) * b], y[r * b:(r + 1) * b]) for x, y in batches]


class MLP(nn.Cell):
    """fc1's and fc2's weights and biases divide by 2 and 4 ranks (sharded);
    out's (3 rows) do not (replicated)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(12, 16, activation="tanh")
        self.fc2 = nn.Dense(16, 8, activation="relu")
        self.out = nn.Dense(8, 3)

    def construct(self, x):
        return self.out(self.fc2(self.fc1(x)))


def make_mlp():
    net = MLP()
    rng = np.random.default_rng(1)
    for p in net.trainable_params():  # the same start on every rank and in the reference
        p.set_data(spora.Tensor((rng.standard_normal(p.shape) * 0.4).astype(np.float32)))
    return net


OPTIMIZERS = {
    "momentum": lambda ps: nn.Momentum(ps, learning_rate=0.05, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: nn.Adam(ps, learning_rate=0.01),
    "adamw_clipped": lambda ps: nn.AdamW(ps, learning_rate=0.01, weight_decay=0.05, clip_norm=0.5),
}


def train(make_net, make_opt, batches, parallel=None):
    """(losses, whole weights, optimizer, model) after one epoch over batches;
    parallel: auto-parallel options, else one process."""
    spora.reset_auto_parallel_context()
    if parallel is not None:
        spora.set_auto_parallel_context(**parallel)
    net = make_net()
    opt = make_opt(net.trainable_params())
    model = Model(nn.WithLossCell(net, nn.MSELoss()), optimizer=opt)
    model._build()
    losses = [float(model._train_step(spora.Tensor(x), spora.Tensor(y)).asnumpy()) for x, y in batches]
    return losses, [p.asnumpy() for p in net.trainable_params()], opt, model


def zero(level, **extra):
    return dict(parallel_mode="data_parallel", gradients_mean=True, enable_parallel_optimizer=True,
                parallel_optimizer_config={"optimizer_level": level, "parallel_optimizer_threshold": 0}, **extra)


@pytest.mark.parametrize("level", ["level1", "level2"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("mode", [spora.GRAPH_MODE, spora.PYNATIVE_MODE], ids=["graph", "pynative"])
def test_mlp_equals_one_process(mode, opt_name, level):
    spora.set_context(mode=mode)
    n = comm.get_group_size()
    batches = global_batches((12,), (3,), seed=2)
    make_opt = OPTIMIZERS[opt_name]
    ref_losses, ref_w, ref_opt, _ = train(make_mlp, make_opt, batches)
    dp_losses, dp_w, _, _ = train(make_mlp, make_opt, rank_shard(batches),
                                  dict(parallel_mode="data_parallel", gradients_mean=True))
    losses, w, opt, model = train(make_mlp, make_opt, rank_shard(batches), zero(level))

    assert opt._zero.sharded == (True, True, True, True, False, False)
    for got, want, start in zip(w, ref_w, [p.asnumpy() for p in make_mlp().trainable_params()]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert not np.allclose(got, start, rtol=1e-3, atol=1e-4)  # it trained
        gathered = comm.all_gather(spora.Tensor(got)).asnumpy()  # the same weights on every rank
        for k in range(n):
            np.testing.assert_array_equal(gathered[k], got)
    # The losses are this rank's batch's: their mean over ranks is the reference's.
    mean_losses = comm.all_reduce(spora.Tensor(np.array(losses, np.float32)), "mean").asnumpy()
    np.testing.assert_allclose(mean_losses, ref_losses, rtol=1e-5, atol=1e-6)
    if level == "level1" and opt.clip_norm is None:
        # All-reduce, slice, update the block, gather: the same arithmetic
        # as plain data parallel, to the bit (clipping sums the global norm
        # from the shards' in another order).
        for got, want in zip(w, dp_w):
            np.testing.assert_array_equal(got, want)
    # The whole state gathered from the ranks' shards equals the reference's.
    for name, states in opt._states.items():
        for s, ref in zip(states, ref_opt._states[name]):
            np.testing.assert_allclose(_zero.gather(s), ref.asnumpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=s.name)
    if mode == spora.GRAPH_MODE:
        text = model._train_step.jit.last_graph.text()
        # One bucket of sharded parameters gathered; level2 reduce-scatters
        # their gradients (one bucket) and all-reduces the rest, level1
        # all-reduces everything; clipping all-reduces the shards' norm.
        clip = 1 if opt.clip_norm is not None else 0
        assert text.count("all_gather(") == 1, text
        assert text.count("reduce_scatter(") == (1 if level == "level2" else 0), text
        assert text.count("all_reduce(") == 1 + clip, text


class Block(nn.Cell):
    """A pre-LN transformer block from primitives: 2-head self-attention and
    a feed-forward pair, both residual. Every Parameter's first dim (16 or
    32) divides by 2 and 4 ranks."""

    def __init__(self, s, d, h, seed):
        super().__init__()
        self.S, self.D, self.H = s, d, h
        rng = np.random.default_rng(seed)

        def p(shape, name, scale=0.2):
            return spora.Parameter(spora.Tensor((rng.standard_normal(shape) * scale).astype(np.float32)), name=name)

        self.wq, self.wk, self.wv, self.wo = (p((d, d), f"{n}{seed}") for n in ("wq", "wk", "wv", "wo"))
        self.w1, self.w2 = p((d, 2 * d), f"w1_{seed}"), p((2 * d, d), f"w2_{seed}")
        self.g1 = spora.Parameter(spora.Tensor(np.ones(d, np.float32)), name=f"g1_{seed}")
        self.b1 = spora.Parameter(spora.Tensor(np.zeros(d, np.float32)), name=f"b1_{seed}")
        self.mm, self.bmm = ops.MatMul(), ops.BatchMatMul()

    def _heads(self, t, b):
        return t.reshape(b, self.S, self.H, self.D // self.H).transpose(0, 2, 1, 3)

    def construct(self, x):
        b, S, D = x.shape[0], self.S, self.D
        x2 = x.reshape(b * S, D)
        n = ops.layer_norm(x2, (D,), self.g1, self.b1)
        q, k, v = (self._heads(self.mm(n, w), b) for w in (self.wq, self.wk, self.wv))
        att = ops.softmax(self.bmm(q, k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(D // self.H)), -1)
        ctx = self.bmm(att, v).transpose(0, 2, 1, 3).reshape(b * S, D)
        h = x2 + self.mm(ctx, self.wo)
        h = h + self.mm(ops.relu(self.mm(h, self.w1)), self.w2)
        return h.reshape(b, S, D)


class Transformer(nn.Cell):
    def __init__(self):
        super().__init__()
        self.blocks = nn.CellList([Block(S, D, 2, seed=10 + i) for i in range(2)])

    def construct(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


S, D = 8, 16


@pytest.mark.parametrize("level", ["level1", "level2"])
def test_transformer_equals_one_process_and_holds_1_over_n_of_the_state(level):
    n, rank = comm.get_group_size(), comm.get_rank()
    batches = global_batches((S, D), (S, D), seed=3)

    def make_opt(ps):
        return nn.AdamW(ps, learning_rate=0.01, weight_decay=0.01)
    ref_losses, ref_w, ref_opt, _ = train(Transformer, make_opt, batches)
    losses, w, opt, _ = train(Transformer, make_opt, rank_shard(batches), zero(level))
    for got, want in zip(w, ref_w):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    mean_losses = comm.all_reduce(spora.Tensor(np.array(losses, np.float32)), "mean").asnumpy()
    np.testing.assert_allclose(mean_losses, ref_losses, rtol=1e-5, atol=1e-6)

    # Per-rank optimizer-state memory: measured from the state Parameters'
    # own buffers, predicted by the formula, and the replicated optimizer's.
    assert all(opt._zero.sharded)
    measured, predicted, replicated = opt._zero.state_bytes(opt._states)
    ref_bytes = sum(s.asnumpy().nbytes for ss in ref_opt._states.values() for s in ss)
    for ss in opt._states.values():
        for i, s in enumerate(ss):
            assert s.asnumpy().shape == opt._zero.block_shape(i)
    print(f"\n[zero {level}] rank {rank}/{n}: optimizer state {measured} B measured, {predicted} B predicted "
          f"(replicated: {ref_bytes} B measured, {replicated} B predicted; ratio {measured / ref_bytes:.4f}, "
          f"1/N = {1 / n:.4f})")
    assert replicated == ref_bytes
    assert measured == predicted == ref_bytes // n


def test_jit_step_with_a_scattering_grad_reducer_equals_one_process():
    """A hand-written compiled step: DistributedGradReducer(scatter=opt)
    reduce-scatters the sharded parameters' gradients (level2)."""
    batches = global_batches((12,), (3,), seed=6)
    _, ref_w, _, _ = train(make_mlp, OPTIMIZERS["momentum"], batches)
    spora.set_auto_parallel_context(**zero("level2"))
    net = make_mlp()
    opt = OPTIMIZERS["momentum"](net.trainable_params())
    reducer = nn.DistributedGradReducer(opt.parameters, mean=True, scatter=opt)
    grad_fn = spora.value_and_grad(nn.WithLossCell(net, nn.MSELoss()), grad_position=None, weights=opt.parameters)

    @spora.jit
    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(reducer(grads))
        return loss
    for x, y in rank_shard(batches):
        step(spora.Tensor(x), spora.Tensor(y))
    for got, want in zip([p.asnumpy() for p in net.trainable_params()], ref_w):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert step.last_graph.text().count("reduce_scatter(") == 1


def test_level1_with_a_loss_scale_manager_equals_one_process():
    """Model's loss-scaled step (finiteness check on the whole all-reduced
    gradients) feeds whole gradients, which the sharded optimizer slices."""
    batches = global_batches((12,), (3,), seed=5)

    def run(shard, parallel):
        spora.reset_auto_parallel_context()
        if parallel:
            spora.set_auto_parallel_context(**parallel)
        net = make_mlp()
        model = Model(nn.WithLossCell(net, nn.MSELoss()), optimizer=nn.Adam(net.trainable_params(), 0.01),
                      loss_scale_manager=spora.amp.DynamicLossScaleManager(2.0 ** 10))
        model._build()
        for x, y in (rank_shard(batches) if shard else batches):
            model._train_step(spora.Tensor(x), spora.Tensor(y))
        return [p.asnumpy() for p in net.trainable_params()]
    for got, want in zip(run(True, zero("level1")), run(False, None)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_small_parameters_stay_replicated_under_the_default_threshold():
    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                    enable_parallel_optimizer=True)
    big = spora.Parameter(spora.Tensor(np.zeros((128, 128), np.float32)), name="big")  # 64 KiB
    small = spora.Parameter(spora.Tensor(np.zeros((128, 4), np.float32)), name="small")
    odd = spora.Parameter(spora.Tensor(np.zeros((129, 128), np.float32)), name="odd")  # 129 rows
    opt = nn.Adam([big, small, odd])
    assert opt._zero.sharded == (True, False, False)
    assert opt._zero.level == "level1"
    measured, predicted, replicated = opt._zero.state_bytes(opt._states)
    n, r = comm.get_group_size(), comm.get_rank()
    assert measured == predicted == 2 * 4 * (128 * 128 // n + 128 * 4 + 129 * 128)
    text = spora.parallel.describe_optimizer_sharding(opt)
    b = 128 // n
    assert f"big (128, 128): sharded, block ({b}, 128) (rows {r * b}:{(r + 1) * b})" in text, text
    assert "small (128, 4): replicated (under parallel_optimizer_threshold 64 KB)" in text, text
    assert f"odd (129, 128): replicated (first dim does not divide by {n})" in text, text
    assert f"{measured} measured, {predicted} predicted, {replicated} replicated" in text, text
    spora.reset_auto_parallel_context()
    assert "not sharded" in spora.parallel.describe_optimizer_sharding(nn.Adam([big]))


def test_checkpoint_holds_the_whole_state_and_loads_back_into_shards(tmp_path):
    rank = comm.get_rank()
    batches = global_batches((12,), (3,), seed=4)
    make_opt = OPTIMIZERS["adam"]
    _, _, ref_opt, _ = train(make_mlp, make_opt, batches)
    _, _, opt, _ = train(make_mlp, make_opt, rank_shard(batches), zero("level2"))
    path = str(tmp_path / f"opt_rank{rank}.ckpt")  # every rank saves (gathering is collective)
    spora.save_checkpoint(opt, path)
    saved = spora.load_checkpoint(path)
    for name, states in ref_opt._states.items():
        for s in states:
            np.testing.assert_allclose(saved[s.name].asnumpy(), s.asnumpy(), rtol=1e-4, atol=1e-6, err_msg=s.name)
    # Into a fresh sharded optimizer: each rank keeps its block.
    fresh = make_opt(make_mlp().trainable_params())
    spora.load_checkpoint(path, net=fresh)
    for name, states in opt._states.items():
        for s, f in zip(states, fresh._states[name]):
            np.testing.assert_array_equal(f.asnumpy(), s.asnumpy(), err_msg=s.name)
    # One process's checkpoint into a sharded optimizer, and the sharded
    # run's into one process's: the same whole state either way.
    ref_path = str(tmp_path / f"ref_rank{rank}.ckpt")
    spora.save_checkpoint(ref_opt, ref_path)
    spora.load_checkpoint(ref_path, net=fresh)
    spora.reset_auto_parallel_context()
    alone = make_opt(make_mlp().trainable_params())
    assert alone._zero is None
    spora.load_checkpoint(path, net=alone)
    for name, states in fresh._states.items():
        for s, a in zip(states, alone._states[name]):
            np.testing.assert_allclose(_zero.gather(s), a.asnumpy(), rtol=1e-4, atol=1e-6, err_msg=s.name)


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="level3, sharding the weights too, is not implemented"):
        spora.set_auto_parallel_context(parallel_optimizer_config={"optimizer_level": "level3"})
    with pytest.raises(ValueError, match="unknown keys"):
        spora.set_auto_parallel_context(parallel_optimizer_config={"shard_size": 2})
    with pytest.raises(ValueError, match="must be True or False"):
        spora.set_auto_parallel_context(enable_parallel_optimizer=1)
    # Under semi_auto_parallel the SPMD pass splits the state instead
    # (spmd/test_parallel_optimizer_spmd.py): no rank-side sharding here.
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", enable_parallel_optimizer=True)
    semi = nn.Adam(make_mlp().trainable_params())
    assert semi._zero is None and semi._spmd_shard_axis == 0
    spora.set_auto_parallel_context(parallel_mode="data_parallel")
    spora.set_auto_parallel_context(**zero("level2"))
    net = make_mlp()
    opt = nn.Adam(net.trainable_params())
    with pytest.raises(ValueError, match="update_subset is not implemented"):
        opt.update_subset([None] * len(opt.parameters))
    bad = [ops.zeros((2, 2)) for _ in opt.parameters]
    with pytest.raises(ValueError, match=r"gradient of 'fc1.weight' has shape \(2, 2\); expected \(16, 12\) or "
                                         r"this rank's block"):
        opt(bad)
    with pytest.raises(ValueError, match="level2' with a loss scale manager is not implemented"):
        Model(nn.WithLossCell(net, nn.MSELoss()), optimizer=opt,
              loss_scale_manager=spora.amp.FixedLossScaleManager(128.0))._build()
