"""Semi-automatic parallelism (docs/parallel.md), run by ctest under
`mpirun -np 2` and `-np 4` (every rank runs this file; each test is
collective).

The check: an MLP with a wide hidden layer, its first matmul split by
columns and its second by rows over every rank (Megatron's pair), trained
under semi_auto_parallel for several steps, ends with the same weights and
losses as the same MLP trained in one process; each rank holds 1/N of the
split weights."""
import os
import tempfile

import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import nn, ops
from spora.dataset import NumpySlicesDataset
from spora.train import Model
from spora import _spmd

HIDDEN = 256




class MLP(nn.Cell):
    """32 -> HIDDEN -> 10 with primitives, so each matmul can carry a strategy."""

    def __init__(self, n=1, hidden=HIDDEN, strategies=None):
        super().__init__()
        rng = np.random.default_rng(7)  # the same weights on every rank
        self.w1 = spora.Parameter(spora.Tensor((rng.standard_normal((32, hidden)) * 0.2).astype(np.float32)), name="w1")
        self.b1 = spora.Parameter(spora.Tensor((rng.standard_normal(hidden) * 0.1).astype(np.float32)), name="b1")
        self.w2 = spora.Parameter(spora.Tensor((rng.standard_normal((hidden, 10)) * 0.2).astype(np.float32)), name="w2")
        self.b2 = spora.Parameter(spora.Tensor((rng.standard_normal(10) * 0.1).astype(np.float32)), name="b2")
        s1, s2 = strategies or (((1, 1), (1, n)),   # columns of w1
                                ((1, n), (n, 1)))   # rows of w2: partial sums, all-reduced
        self.mm1 = ops.MatMul().shard(s1)
        self.mm2 = ops.MatMul().shard(s2)
        self.add1 = ops.Add()
        self.add2 = ops.Add()
        self.relu = ops.ReLU()

    def construct(self, x):
        h = self.relu(self.add1(self.mm1(x, self.w1), self.b1))
        return self.add2(self.mm2(h, self.w2), self.b2)


def make_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    y = (np.abs(x[:, :10]).argmax(axis=1)).astype(np.int32)
    return x, y


class LossLog(spora.train.callbacks.Callback if hasattr(spora.train, "callbacks") else object):
    pass


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


def batches(n_steps=6, batch=16):
    x, y = make_data()
    return [(x[i * batch % 64:(i * batch % 64) + batch], y[i * batch % 64:(i * batch % 64) + batch])
            for i in range(n_steps)]


def test_semi_auto_mlp_equals_single_process():
    n = comm.get_group_size()
    assert n >= 2, "run under mpirun -np 2 or 4"
    data = batches()

    ref = MLP(1)
    ref_losses, _ = train(ref, data)

    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = MLP(n)
    losses, step = train(net, data)

    # Split weights: this rank holds 1/N of w1, b1 (propagated from w1's
    # columns) and w2; b2 is whole.
    assert net.w1.asnumpy().shape == (32, HIDDEN // n)
    assert net.b1.asnumpy().shape == (HIDDEN // n,)
    assert net.w2.asnumpy().shape == (HIDDEN // n, 10)
    assert net.b2.asnumpy().shape == (10,)
    assert net.w1.shape == (32, HIDDEN)  # the Parameter still reports its whole shape
    for p in (net.w1, net.w2, net.b1):
        assert p.asnumpy().nbytes * n == _spmd.gather(p).nbytes
    rank = comm.get_rank()
    np.testing.assert_array_equal(net.w1.asnumpy(), _spmd.gather(net.w1)[:, rank * HIDDEN // n:(rank + 1) * HIDDEN // n])

    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    assert abs(losses[-1] - losses[0]) > 1e-3  # it trained
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)

    # The rank's graph: both matmuls local, one all_reduce of the row-split
    # product's partial sums in the forward pass; no weight is gathered.
    text = step.last_graph.text()
    assert "all_reduce(" in text, text
    plan = _spmd.describe(step.last_plan)
    assert "w1: (32, 256) [R, S0] -> local (32, %d)" % (HIDDEN // n) in plan, plan


def test_checkpoint_saves_whole_tensors():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = MLP(n)
    train(net, batches(2))
    whole = {p.name: _spmd.gather(p) for p in net.trainable_params()}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"rank{comm.get_rank()}.ckpt")
        spora.save_checkpoint(net, path)
        loaded = spora.load_checkpoint(path)
        for name, value in whole.items():
            np.testing.assert_array_equal(loaded[name].asnumpy(), value)
        # Loading whole tensors into a split network keeps this rank's block.
        net2 = MLP(n)
        train(net2, batches(1))
        spora.load_param_into_net(net2, loaded)
        for p in net2.trainable_params():
            np.testing.assert_array_equal(_spmd.gather(p), whole[p.name])


def test_strategy_that_does_not_divide_names_op_line_and_numbers():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = MLP(n, hidden=15)  # 15 columns do not split over 2 or 4 ranks
    with pytest.raises(ValueError) as e:
        train(net, batches(1))
    msg = str(e.value)
    assert "[matmul] strategy ((1, 1), (1, %d))" % n in msg, msg
    assert "size 15" in msg and "%d blocks" % n in msg, msg
    assert "test_semi_auto.py:" in msg, msg


def test_device_num_must_match_the_launched_ranks():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n + 1)
    net = MLP(n)
    with pytest.raises(ValueError, match=f"device_num={n + 1} but the launched job has {n} ranks"):
        train(net, batches(1))


def test_2x2_mesh_with_named_axes_mixes_data_and_tensor_parallel():
    """mesh (2, 2) named (dp, mp): the batch is split over dp (each rank
    slices its rows of the whole batch), the hidden layer over mp; weight
    gradients are partial sums over dp, all-reduced on the dp communicator
    (data parallelism), the row-split product's over mp."""
    n = comm.get_group_size()
    if n != 4:
        pytest.skip("needs 4 ranks")
    data = batches()
    ref = MLP(1)
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=4, mesh_shape=(2, 2),
                                    axis_names=("dp", "mp"))
    net = MLP(strategies=((("dp", 1), (1, "mp")), (("dp", "mp"), ("mp", 1))))
    losses, step = train(net, data)
    assert net.w1.asnumpy().shape == (32, HIDDEN // 2)
    assert net.w2.asnumpy().shape == (HIDDEN // 2, 10)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)
    plan = _spmd.describe(step.last_plan)
    assert "[R, Smp]" in plan and "[Sdp, R]" in plan, plan


def test_mesh_shape_must_hold_device_num():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n, mesh_shape=(n, 2))
    with pytest.raises(ValueError, match=f"mesh_shape=\\({n}, 2\\) holds {2 * n} devices but device_num={n}"):
        train(MLP(n), batches(1))


def test_cell_shard_splits_the_cell_inputs():
    """Cell.shard(in_strategy): the MLP's input split by rows over every rank
    (data parallel inside the step, propagated through both matmuls; the
    weights stay whole and their gradients are all-reduced)."""
    n = comm.get_group_size()
    data = batches()
    ref = MLP(1)
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = MLP(n)
    net.mm1.strategy = net.mm2.strategy = None  # only the cell's input is annotated
    net.shard(in_strategy=((n, 1),))
    losses, step = train(net, data)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        assert p.asnumpy().shape == p_ref.asnumpy().shape  # nothing split
        np.testing.assert_allclose(p.asnumpy(), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)
    plan = _spmd.describe(step.last_plan)
    assert "reshape [strategy ((%d, 1),)]: ([S0, R]) -> ([S0, R])" % n in plan, plan
    assert "matmul: ([S0, R], [R, R]) -> ([S0, R])" in plan, plan


def test_split_moving_between_dims_is_one_all_to_all():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    rows = ops.Reshape().shard(((n, 1),))
    cols = ops.Reshape().shard(((1, n),))
    shape = (4 * n, 2 * n)
    x = (np.arange(8 * n * n, dtype=np.float32).reshape(shape) - 5) / 7

    @spora.jit
    def f(t):
        return cols(rows(t, shape) * 2.0, shape) + 1.0

    np.testing.assert_allclose(f(spora.Tensor(x)).asnumpy(), x * 2 + 1, rtol=1e-6)
    text = f.last_graph.text()
    assert text.count("all_to_all(") == 1 and "concat_axis=0" in text, text


def test_model_train_in_graph_mode_is_partitioned():
    """spora.train.Model compiles its train step with spora.jit: under
    semi_auto_parallel that step is partitioned like any other."""
    n = comm.get_group_size()
    x, y = make_data()

    def fit(net):
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
        model = Model(net, nn.CrossEntropyLoss(), opt)
        model.train(2, NumpySlicesDataset((x, y)).batch(16))
        return model

    ref = MLP(1)
    fit(ref)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = MLP(n)
    model = fit(net)
    assert net.w2.asnumpy().shape == (HIDDEN // n, 10)
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)
    assert "all_reduce(" in model._train_step.jit.last_graph.text()


class TinyLM(nn.Cell):
    """Embedding -> layer norm -> flatten -> 2-layer MLP: the pieces of a
    transformer block that have rules (embedding, layer_norm and their
    gradients, reshape, matmul)."""

    def __init__(self, strategies=None):
        super().__init__()
        rng = np.random.default_rng(3)
        f32 = np.float32
        self.emb = spora.Parameter(spora.Tensor((rng.standard_normal((20, 16)) * 0.5).astype(f32)), name="emb")
        self.gamma = spora.Parameter(spora.Tensor(1 + (rng.standard_normal(16) * 0.1).astype(f32)), name="gamma")
        self.beta = spora.Parameter(spora.Tensor((rng.standard_normal(16) * 0.1).astype(f32)), name="beta")
        self.w1 = spora.Parameter(spora.Tensor((rng.standard_normal((64, 32)) * 0.2).astype(f32)), name="w1")
        self.w2 = spora.Parameter(spora.Tensor((rng.standard_normal((32, 5)) * 0.2).astype(f32)), name="w2")
        self.lookup = ops.Primitive("embedding")
        self.mm1, self.mm2, self.relu = ops.MatMul(), ops.MatMul(), ops.ReLU()
        if strategies:
            self.mm1.shard(strategies[0])
            self.mm2.shard(strategies[1])

    def construct(self, ids):
        h = ops.layer_norm(self.lookup(self.emb, ids), (16,), self.gamma, self.beta)
        return self.mm2(self.relu(self.mm1(h.reshape(ids.shape[0], 64), self.w1)), self.w2)


@pytest.mark.parametrize("how", ["batch", "hidden"])
def test_embedding_layer_norm_mlp_equals_single_process(how):
    n = comm.get_group_size()
    rng = np.random.default_rng(11)
    data = [(rng.integers(0, 20, (8, 4)).astype(np.int32), rng.integers(0, 5, 8).astype(np.int32)) for _ in range(4)]
    ref = TinyLM()
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    if how == "batch":  # the ids split by rows; everything else follows
        net = TinyLM().shard(in_strategy=((n, 1),))
    else:  # Megatron pair on the MLP; embedding and norm replicated
        net = TinyLM((((1, 1), (1, n)), ((1, n), (n, 1))))
    losses, step = train(net, data)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)
    plan = _spmd.describe(step.last_plan)
    if how == "batch":
        assert "layer_norm_grad: ([S0, R, R], [S0, R, R], [R], [S0, R], [S0, R]) -> ([S0, R, R], [R]+P{0}, [R]+P{0})" \
            in plan, plan
    else:
        assert net.w1.asnumpy().shape == (64, 32 // n)


class TinyCNN(nn.Cell):
    """conv 3x3 (2 -> 4 channels) -> relu -> flatten -> matmul -> 3 classes."""

    def __init__(self, channel_split=1):
        super().__init__()
        rng = np.random.default_rng(5)
        f32 = np.float32
        self.wc = spora.Parameter(spora.Tensor((rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(f32)), name="wc")
        self.w = spora.Parameter(spora.Tensor((rng.standard_normal((144, 3)) * 0.1).astype(f32)), name="w")
        self.conv = ops.Primitive("conv2d", padding=[1, 1])
        if channel_split > 1:
            self.conv.shard(((1, 1, 1, 1), (channel_split, 1, 1, 1)))
        self.mm, self.relu = ops.MatMul(), ops.ReLU()

    def construct(self, x):
        h = self.relu(self.conv(x, self.wc))
        return self.mm(h.reshape(x.shape[0], 144), self.w)


@pytest.mark.parametrize("how", ["batch", "channels"])
def test_conv_net_equals_single_process(how):
    n = comm.get_group_size()
    rng = np.random.default_rng(13)
    data = [(rng.standard_normal((8, 2, 6, 6)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32))
            for _ in range(4)]
    ref = TinyCNN()
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = TinyCNN().shard(in_strategy=((n, 1, 1, 1),)) if how == "batch" else TinyCNN(channel_split=n)
    losses, step = train(net, data)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)
    plan = _spmd.describe(step.last_plan)
    if how == "batch":
        assert "conv2d_grad_weight: ([S0, R, R, R], [S0, R, R, R]) -> ([R, R, R, R]+P{0})" in plan, plan
    else:
        assert net.wc.asnumpy().shape == (4 // n, 2, 3, 3) and net.w.asnumpy().shape == (144 // n, 3), plan


def test_eager_call_with_split_parameters_is_refused():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = MLP(n)
    train(net, batches(1))
    spora.set_context(mode=spora.PYNATIVE_MODE)
    with pytest.raises(RuntimeError, match="Parameter 'w1' holds only this rank's block of \\(32, 256\\)"):
        net(spora.Tensor(batches(1)[0][0]))
    spora.set_context(mode=spora.GRAPH_MODE)  # compiled, it runs: the whole output on every rank
    assert net(spora.Tensor(batches(1)[0][0])).shape == (16, 10)


class TinyTransformer(nn.Cell):
    """One encoder block from primitives: multi-head self-attention (heads
    split over the ranks: q/k/v projections by columns, the output
    projection by rows, Megatron's layout), residual and layer norm, then a
    feed-forward pair split the same way."""

    B, S, D, H, F = 4, 8, 16, 4, 32

    def __init__(self, n=1):
        super().__init__()
        rng = np.random.default_rng(5)
        f32 = np.float32
        D, F = self.D, self.F

        def p(shape, name, scale=0.3):
            return spora.Parameter(spora.Tensor((rng.standard_normal(shape) * scale).astype(f32)), name=name)

        self.wq, self.wk, self.wv, self.wo = p((D, D), "wq"), p((D, D), "wk"), p((D, D), "wv"), p((D, D), "wo")
        self.w1, self.w2 = p((D, F), "w1"), p((F, D), "w2")
        self.gamma = spora.Parameter(spora.Tensor(np.ones(D, f32)), name="gamma")
        self.beta = spora.Parameter(spora.Tensor(np.zeros(D, f32)), name="beta")
        cols, rows = ((1, 1), (1, n)), ((1, n), (n, 1))
        self.q, self.k, self.v = ops.MatMul().shard(cols), ops.MatMul().shard(cols), ops.MatMul().shard(cols)
        self.o = ops.MatMul().shard(rows)
        heads = ((1, n, 1, 1), (1, n, 1, 1))
        self.scores = ops.BatchMatMul().shard(heads)
        self.context = ops.BatchMatMul().shard(heads)
        self.ff1, self.ff2 = ops.MatMul().shard(cols), ops.MatMul().shard(rows)
        self.relu = ops.ReLU()

    def _heads(self, t):
        return t.reshape(self.B, self.S, self.H, self.D // self.H).transpose(0, 2, 1, 3)

    def construct(self, x):
        B, S, D = self.B, self.S, self.D
        x2 = x.reshape(B * S, D)
        q, k, v = self._heads(self.q(x2, self.wq)), self._heads(self.k(x2, self.wk)), self._heads(self.v(x2, self.wv))
        att = ops.softmax(self.scores(q, k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(D // self.H)), -1)
        ctx = self.context(att, v).transpose(0, 2, 1, 3).reshape(B * S, D)
        h = ops.layer_norm(x2 + self.o(ctx, self.wo), (D,), self.gamma, self.beta)
        return (h + self.ff2(self.relu(self.ff1(h, self.w1)), self.w2)).reshape(B, S, D)


def test_small_transformer_block_equals_single_process():
    """Issue 15 line 3's transformer: heads split over the ranks equals the
    one-process block step by step; the split weights are 1/N per rank."""
    n = comm.get_group_size()
    if TinyTransformer.H % n:
        pytest.skip(f"{TinyTransformer.H} heads do not split over {n} ranks")
    rng = np.random.default_rng(21)
    T = TinyTransformer
    data = [(rng.standard_normal((T.B, T.S, T.D)).astype(np.float32),
             rng.standard_normal((T.B, T.S, T.D)).astype(np.float32)) for _ in range(4)]

    def fit(net):
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
        loss_fn = nn.MSELoss()
        grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

        @spora.jit
        def step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss
        return [float(step(spora.Tensor(x), spora.Tensor(y)).asnumpy()) for x, y in data]

    ref = TinyTransformer()
    ref_losses = fit(ref)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = TinyTransformer(n)
    losses = fit(net)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    for p_ref, p in zip(ref.trainable_params(), net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=p.name)
    D, F = T.D, T.F
    assert net.wq.asnumpy().shape == (D, D // n) and net.wo.asnumpy().shape == (D // n, D)
    assert net.w1.asnumpy().shape == (D, F // n) and net.w2.asnumpy().shape == (F // n, D)
