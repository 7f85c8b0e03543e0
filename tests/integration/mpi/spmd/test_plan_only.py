"""spora.parallel.plan (docs/parallel.md, "Planning models larger than this
machine"), run by ctest under `mpirun -np 2` and `-np 4` with the other
files of this directory (every test is collective).

The check: the plan made without running anything -- no communicator, no
ranks, Parameters declared without data -- is the plan the real
partitioned training step makes on these ranks: the same weight layouts and
local shapes, the same per-op decisions, and under auto_parallel the same
strategies, estimated step time and memory per device."""
import numpy as np

import spora
from spora import communication as comm
from spora import nn, ops

HIDDEN = 256


class MLP(nn.Cell):
    """32 -> HIDDEN -> 10 of spora.nn layers; strategies where given."""

    def __init__(self, s1=None):
        super().__init__()
        self.fc1 = nn.Dense(32, HIDDEN)
        self.fc2 = nn.Dense(HIDDEN, 10)
        self.relu = ops.ReLU().shard(s1) if s1 else ops.ReLU()

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def make_step(net):
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    return step


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    return spora.Tensor(x), spora.Tensor((np.abs(x[:, :10]).argmax(axis=1)).astype(np.int32))


def real_plan(s1=None, **ctx):
    """The plan of one real compiled step on these ranks."""
    spora.set_auto_parallel_context(device_num=comm.get_group_size(), **ctx)
    nn.init.set_seed(1)  # the same weights on every rank
    step = spora.jit(make_step(MLP(s1)))
    step(*data())
    return step.last_plan


def meta_plan(s1=None, **ctx):
    """The same plan from declared shapes alone, made without the ranks."""
    with nn.utils.no_init_parameters():
        net = MLP(s1)
    x = spora.Tensor(shape=(16, 32), dtype=spora.float32)
    y = spora.Tensor(shape=(16,), dtype=spora.int32)
    plan = spora.parallel.plan(make_step(net), x, y, device_num=comm.get_group_size(), **ctx)
    assert all(p.has_init for p in net.get_parameters())  # planning drew and allocated nothing
    return plan


def same(real, plan):
    assert plan["rank"] == 0
    real = dict(real, rank=0)
    assert [w["layout"] for w in plan["weights"]] == [w["layout"] for w in real["weights"]]
    assert plan == real


def test_plan_only_equals_the_auto_parallel_plan_of_the_real_step():
    n = comm.get_group_size()
    ctx = dict(parallel_mode="auto_parallel", search_mode="dynamic_programming")
    free = meta_plan(**ctx)["plan"]
    # 30% of the weights' bytes less than the unlimited plan needs: the
    # search must split weights.
    ctx["memory_limit"] = free["memory_bytes"] - 0.3 * free["weight_bytes"]
    real = real_plan(**ctx)
    plan = meta_plan(**ctx)
    assert plan["plan"]["fits"] and plan["plan"]["memory_bytes"] < free["memory_bytes"]
    assert any("S" in w["layout"] for w in plan["weights"]), spora.parallel.describe_plan(plan)
    same(real, plan)
    assert n >= 2


def test_plan_only_equals_the_semi_auto_plan_of_the_real_step():
    n = comm.get_group_size()
    s1 = ((1, n),)
    real = real_plan(s1, parallel_mode="semi_auto_parallel")
    plan = meta_plan(s1, parallel_mode="semi_auto_parallel")
    same(real, plan)
