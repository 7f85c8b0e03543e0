"""The sharding rules of the indexing ops (embedding's gradient scatter_add,
gather, index_select, gather_nd, gather_elements) and of batch_norm and
group_norm on real ranks (ctest mpi_python_semi_auto_2 / _4; every test is
collective): each model trained under semi_auto_parallel with the batch or
the channels split equals the same model trained in one process, and the
rank's plan shows the rules at work -- the table gradient is a local
scatter of this rank's tokens plus one all_reduce (no all_gather of token
ids or updates), a batch split reaching a training batch_norm moves to the
channels by one all_to_all (statistics of the whole batch, as in one
process), group_norm keeps the batch split and splits channels by whole
groups. auto_parallel (both search modes) plans with the new rules, and
strategies batch_norm cannot honour are errors naming op, line and
numbers."""
import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import nn, ops
from spora import _spmd

RTOL, ATOL = 1e-5, 1e-6  # the other semi-auto tests' tolerance
F32 = np.float32


def train(net, data, loss_fn, lr=0.1):
    opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9)
    grad_fn = spora.value_and_grad(lambda *a: loss_fn(net(*a[:-1]), a[-1]), grad_position=None,
                                   weights=opt.parameters)

    @spora.jit
    def step(*a):
        loss, grads = grad_fn(*a)
        opt(grads)
        return loss

    losses = [float(step(*[spora.Tensor(t) for t in batch]).asnumpy()) for batch in data]
    return losses, step


def assert_same_training(ref, ref_losses, net, losses, params=None):
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL, atol=ATOL)
    assert abs(losses[-1] - losses[0]) > 1e-4  # it trained
    for p_ref, p in zip(params(ref) if params else ref.trainable_params(),
                        params(net) if params else net.trainable_params()):
        np.testing.assert_allclose(_spmd.gather(p), p_ref.asnumpy(), rtol=RTOL, atol=ATOL, err_msg=p.name)


def op_lines(plan, op):
    return [line.strip() for line in plan.splitlines() if f" {op}:" in line or f" {op} [" in line]


def graph_lines(text, op):
    return [line.strip() for line in text.splitlines() if f"= {op}(" in line]


def reduced_once(text, shape, numel):
    """A gradient of `shape` is all-reduced: by itself, or inside a bucket of
    gradients (passes/allreduce_fusion.cpp: flattened to `numel` elements,
    concatenated, one all_reduce, split back)."""
    if any(f": f32[{shape}]" in line for line in graph_lines(text, "all_reduce")):
        return True
    flat = [line for line in graph_lines(text, "reshape") if line.split("#")[0].strip().endswith(f": f32[{numel}]")]
    return bool(flat) and bool(graph_lines(text, "concat")) and bool(graph_lines(text, "all_reduce"))


class Lookup(nn.Cell):
    """A (20, 16) table looked up by ids (8, 4) through `kind`, then
    tanh -> flatten -> matmul -> 5 classes."""

    def __init__(self, kind):
        super().__init__()
        rng = np.random.default_rng(3)
        self.table = spora.Parameter(spora.Tensor((rng.standard_normal((20, 16)) * 0.5).astype(F32)), name="table")
        self.w = spora.Parameter(spora.Tensor((rng.standard_normal((64, 5)) * 0.2).astype(F32)), name="w")
        self.kind = kind
        self.lookup = {"embedding": ops.Primitive("embedding"), "gather": ops.Primitive("gather", axis=0),
                       "index_select": ops.Primitive("index_select", axis=0),
                       "gather_nd": ops.Primitive("gather_nd")}[kind]
        self.mm, self.tanh = ops.MatMul(), ops.Tanh()

    def construct(self, ids):
        if self.kind == "index_select":
            rows = self.lookup(self.table, ids.reshape(32))
        elif self.kind == "gather_nd":
            rows = self.lookup(self.table, ids.reshape(8, 4, 1))
        else:
            rows = self.lookup(self.table, ids)
        return self.mm(self.tanh(rows.reshape(8, 64)), self.w)


@pytest.mark.parametrize("kind", ["embedding", "gather", "index_select", "gather_nd"])
def test_lookup_gradient_is_a_local_scatter_and_one_all_reduce(kind):
    n = comm.get_group_size()
    rng = np.random.default_rng(11)
    data = [(rng.integers(0, 20, (8, 4)).astype(np.int32), rng.integers(0, 5, 8).astype(np.int32))
            for _ in range(4)]
    ref = Lookup(kind)
    ref_losses, _ = train(ref, data, nn.CrossEntropyLoss())
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = Lookup(kind).shard(in_strategy=((n, 1),))  # the ids split by batch; the rest follows
    losses, step = train(net, data, nn.CrossEntropyLoss())
    assert_same_training(ref, ref_losses, net, losses)

    plan = _spmd.describe(step.last_plan)
    text = step.last_graph.text()
    # The lookup runs on this rank's ids, the table whole.
    assert any(line.endswith("-> ([S0, R, R])") or line.endswith("-> ([S0, R])")
               for line in op_lines(plan, kind)), plan
    # Its gradient: scatter_add of this rank's tokens into the table, a
    # partial sum over the ranks (the table kept on one coordinate) ...
    scatters = op_lines(plan, "scatter_add")
    assert len(scatters) == 1 and scatters[0].endswith("[S0, R], [S0, R]) -> ([R, R]+P{0})"), plan
    local = graph_lines(text, "scatter_add")
    assert len(local) == 1 and f"f32[{32 // n},16]" in text and ": f32[20,16]" in local[0], text
    # ... all-reduced once; nothing gathers token ids or updates (the only
    # all_gather is the loss's (8, 5) logits, whose mean rule wants them whole).
    assert reduced_once(text, "20,16", 20 * 16), text
    gathers = graph_lines(text, "all_gather")
    assert all(line.split("#")[0].strip().endswith(": f32[8,5]") for line in gathers), gathers


@pytest.mark.parametrize("search_mode", ["dynamic_programming", "sharding_propagation"])
def test_auto_parallel_plans_the_embedding_gradient_split(search_mode):
    """auto_parallel with no strategy (dynamic_programming) or with the ids'
    batch split only (sharding_propagation): the plan splits the table
    gradient's scatter_add (by tokens or by features, as the search finds
    cheaper) and training equals one process."""
    n = comm.get_group_size()
    rng = np.random.default_rng(11)
    data = [(rng.integers(0, 20, (8, 4)).astype(np.int32), rng.integers(0, 5, 8).astype(np.int32))
            for _ in range(4)]
    ref = Lookup("embedding")
    ref_losses, _ = train(ref, data, nn.CrossEntropyLoss())
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode=search_mode, device_num=n)
    net = Lookup("embedding")
    if search_mode == "sharding_propagation":
        net = net.shard(in_strategy=((n, 1),))
    losses, step = train(net, data, nn.CrossEntropyLoss())
    assert_same_training(ref, ref_losses, net, losses)
    scatters = op_lines(_spmd.describe(step.last_plan), "scatter_add")
    assert scatters and all("S0" in line for line in scatters), scatters


class PickColumns(nn.Cell):
    """x (8, 12) @ w (12, 10), then gather_elements picks 3 columns per row."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(4)
        self.w = spora.Parameter(spora.Tensor((rng.standard_normal((12, 10)) * 0.3).astype(F32)), name="w")
        self.mm = ops.MatMul()
        self.pick = ops.Primitive("gather_elements", axis=1)

    def construct(self, x, idx):
        return self.pick(self.mm(x, self.w), idx)


def test_gather_elements_batch_split_stays_local():
    n = comm.get_group_size()
    rng = np.random.default_rng(12)
    data = [(rng.standard_normal((8, 12)).astype(F32), rng.integers(0, 10, (8, 3)).astype(np.int32),
             rng.standard_normal((8, 3)).astype(F32)) for _ in range(4)]
    ref = PickColumns()
    ref_losses, _ = train(ref, data, nn.MSELoss())
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = PickColumns().shard(in_strategy=((n, 1), (n, 1)))
    losses, step = train(net, data, nn.MSELoss())
    assert_same_training(ref, ref_losses, net, losses)
    plan = _spmd.describe(step.last_plan)
    assert op_lines(plan, "gather_elements")[0].endswith("([S0, R], [S0, R]) -> ([S0, R])"), plan
    # Its gradient scatters along dim 1 with the batch split: split, local.
    assert op_lines(plan, "scatter_add")[0].endswith("([S0, R], [S0, R], [S0, R]) -> ([S0, R])"), plan
    assert not any(" i32[" in line for line in graph_lines(step.last_graph.text(), "all_gather")), plan


class ConvNorm(nn.Cell):
    """conv 3x3 (2 -> c channels) -> batch_norm (nn.BatchNorm2d) or
    group_norm -> relu -> flatten -> matmul -> 3 classes."""

    def __init__(self, norm, c=4, channel_split=1):
        super().__init__()
        rng = np.random.default_rng(5)
        self.wc = spora.Parameter(spora.Tensor((rng.standard_normal((c, 2, 3, 3)) * 0.3).astype(F32)), name="wc")
        self.w = spora.Parameter(spora.Tensor((rng.standard_normal((c * 36, 3)) * 0.1).astype(F32)), name="w")
        self.conv = ops.Primitive("conv2d", padding=[1, 1])
        if channel_split > 1:
            self.conv.shard(((1, 1, 1, 1), (channel_split, 1, 1, 1)))
        self.norm_kind = norm
        if norm == "batch_norm":
            self.bn = nn.BatchNorm2d(c, momentum=0.9)
            self.bn.gamma.set_data(spora.Tensor((1 + rng.standard_normal(c) * 0.1).astype(F32)))
            self.bn.beta.set_data(spora.Tensor((rng.standard_normal(c) * 0.1).astype(F32)))
        else:
            self.gamma = spora.Parameter(spora.Tensor((1 + rng.standard_normal(c) * 0.1).astype(F32)), name="gamma")
            self.beta = spora.Parameter(spora.Tensor((rng.standard_normal(c) * 0.1).astype(F32)), name="beta")
            self.gn = ops.Primitive("group_norm", nout=3, groups=4)
        self.mm, self.relu = ops.MatMul(), ops.ReLU()
        self.c = c

    def construct(self, x):
        h = self.conv(x, self.wc)
        h = self.bn(h) if self.norm_kind == "batch_norm" else self.gn(h, self.gamma, self.beta)[0]
        return self.mm(self.relu(h).reshape(x.shape[0], self.c * 36), self.w)


def conv_data():
    rng = np.random.default_rng(13)
    return [(rng.standard_normal((8, 2, 6, 6)).astype(F32), rng.integers(0, 3, 8).astype(np.int32))
            for _ in range(4)]


def moving_and_trainable(net):
    ps = list(net.trainable_params())
    if net.norm_kind == "batch_norm":
        ps += [net.bn.moving_mean, net.bn.moving_variance]
    return ps


@pytest.mark.parametrize("how", ["batch", "channels"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_conv_batch_norm_equals_single_process(how, mode):
    """Training batch_norm: statistics of the whole batch on every split
    (the batch split moves to the channels), so the moving statistics too
    equal one process's. Eval (moving statistics): every split passes."""
    n = comm.get_group_size()
    data = conv_data()
    ref = ConvNorm("batch_norm").set_train(mode == "train")
    ref_losses, _ = train(ref, data, nn.CrossEntropyLoss())
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = (ConvNorm("batch_norm").shard(in_strategy=((n, 1, 1, 1),)) if how == "batch"
           else ConvNorm("batch_norm", channel_split=n)).set_train(mode == "train")
    losses, step = train(net, data, nn.CrossEntropyLoss())
    assert_same_training(ref, ref_losses, net, losses, moving_and_trainable)
    if mode == "train":
        assert not np.allclose(_spmd.gather(net.bn.moving_mean), 0)  # the moving statistics moved
    plan = _spmd.describe(step.last_plan)
    text = step.last_graph.text()
    bn = op_lines(plan, "batch_norm")
    assert len(bn) == 1 and f"training={'true' if mode == 'train' else 'false'}" in graph_lines(text, "batch_norm")[0]
    to_all = graph_lines(text, "all_to_all")
    if mode == "eval" and how == "batch":  # an affine map per channel: the batch split stays
        assert bn[0].endswith("([S0, R, R, R], [R], [R], [R], [R]) -> ([S0, R, R, R], [R], [R], [R], [R])"), plan
        assert not to_all, plan
        return
    assert bn[0].endswith("([R, S0, R, R], [S0], [S0], [S0], [S0]) -> ([R, S0, R, R], [S0], [S0], [S0], [S0])"), plan
    assert net.bn.gamma.asnumpy().shape == (4 // n,) and net.bn.moving_mean.asnumpy().shape == (4 // n,)
    if mode == "train":
        assert op_lines(plan, "batch_norm_grad")[0].endswith("-> ([R, S0, R, R], [S0], [S0])"), plan
    if how == "batch":  # the conv's batch split moves to the channels (and back for the gradient)
        assert to_all, plan
    else:  # the conv's channel split is the norm's: nothing moves
        assert not to_all, plan


@pytest.mark.parametrize("how", ["batch", "channels"])
def test_conv_group_norm_equals_single_process(how):
    n = comm.get_group_size()
    data = conv_data()
    ref = ConvNorm("group_norm", c=8)
    ref_losses, _ = train(ref, data, nn.CrossEntropyLoss())
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    net = (ConvNorm("group_norm", c=8).shard(in_strategy=((n, 1, 1, 1),)) if how == "batch"
           else ConvNorm("group_norm", c=8, channel_split=n))
    losses, step = train(net, data, nn.CrossEntropyLoss())
    assert_same_training(ref, ref_losses, net, losses)
    plan = _spmd.describe(step.last_plan)
    text = step.last_graph.text()
    if how == "batch":  # per-sample statistics: the batch split is free
        assert op_lines(plan, "group_norm")[0].endswith("-> ([S0, R, R, R], [S0, R], [S0, R])"), plan
        assert op_lines(plan, "group_norm_grad")[0].endswith("-> ([S0, R, R, R], [R]+P{0}, [R]+P{0})"), plan
    else:  # 4 groups of 2 channels: each rank holds 4/n whole groups
        assert op_lines(plan, "group_norm")[0].endswith("-> ([R, S0, R, R], [R, S0], [R, S0])"), plan
        assert f"groups={4 // n}" in graph_lines(text, "group_norm")[0], text
        assert net.gamma.asnumpy().shape == (8 // n,)
    assert not graph_lines(text, "all_to_all"), text


class StrategicNorm(nn.Cell):
    """conv (2 -> c channels) -> batch_norm called as a primitive with the
    user's strategy -> flatten -> matmul."""

    def __init__(self, strategy, c=4):
        super().__init__()
        self.wc = spora.Parameter(spora.Tensor(np.full((c, 2, 3, 3), 0.1, F32)), name="wc")
        self.w = spora.Parameter(spora.Tensor(np.full((c * 36, 3), 0.1, F32)), name="w")
        self.gamma = spora.Parameter(spora.Tensor(np.ones(c, F32)), name="gamma")
        self.beta = spora.Parameter(spora.Tensor(np.zeros(c, F32)), name="beta")
        self.rm = spora.Parameter(spora.Tensor(np.zeros(c, F32)), name="rm", requires_grad=False)
        self.rv = spora.Parameter(spora.Tensor(np.ones(c, F32)), name="rv", requires_grad=False)
        self.conv = ops.Primitive("conv2d", padding=[1, 1])
        self.bn = ops.Primitive("batch_norm", nout=5, training=True).shard(strategy)
        self.mm = ops.MatMul()
        self.c = c

    def construct(self, x):
        h = self.bn(self.conv(x, self.wc), self.gamma, self.beta, self.rm, self.rv)[0]
        return self.mm(h.reshape(x.shape[0], self.c * 36), self.w)


def test_batch_norm_strategies_split_channels_and_refuse_a_batch_split():
    """A strategy splitting batch_norm's channels is honoured; one splitting
    its batch is refused (per-device statistics would differ from one
    process's), naming the op, the line and the layouts; channels that do
    not divide name the numbers."""
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    data = conv_data()[:1]
    net = StrategicNorm(((1, n, 1, 1), (n,), (n,), (n,), (n,)))
    _, step = train(net, data, nn.CrossEntropyLoss())
    assert f"batch_norm [strategy ((1, {n}, 1, 1), ({n},), ({n},), ({n},), ({n},))]: ([R, S0, R, R]" \
        in _spmd.describe(step.last_plan)
    assert net.gamma.asnumpy().shape == (4 // n,)

    with pytest.raises(ValueError) as e:
        train(StrategicNorm(((n, 1, 1, 1), (1,), (1,), (1,), (1,))), data, nn.CrossEntropyLoss())
    msg = str(e.value)
    assert f"[batch_norm] strategy (({n}, 1, 1, 1), (1,), (1,), (1,), (1,)) cannot be honoured" in msg, msg
    assert "input 0 laid out [R, S0, R, R] instead of [S0, R, R, R]" in msg, msg
    assert "test_index_norm_rules.py:" in msg, msg

    with pytest.raises(ValueError) as e:  # 5 channels split over 2 or 4 ranks
        train(StrategicNorm(((1, n, 1, 1), (n,), (n,), (n,), (n,)), c=5), data, nn.CrossEntropyLoss())
    msg = str(e.value)
    assert "[batch_norm] strategy" in msg and "size 5" in msg and f"{n} blocks" in msg, msg
    assert "test_index_norm_rules.py:" in msg, msg
