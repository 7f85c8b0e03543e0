"""A second compiled step over a network whose Parameters an earlier plan
split (docs/parallel.md, "Semi-automatic parallelism"): the new plan keeps
their layouts (spora_graph_partition's "weights" option) instead of asking
to split them again, and computes what one process computes. Before, any
different layout raised "re-splitting is not supported yet"."""
import numpy as np

import spora
from spora import communication as comm
from spora import nn, ops
from spora import _spmd

from test_auto_parallel import MLP, batches, train


def test_eval_step_after_an_auto_parallel_training_step_keeps_the_split():
    n = comm.get_group_size()
    data = batches(2)
    ref = MLP()
    train(ref, data)
    # A memory limit that makes the training plan split w1 (as in
    # test_auto_parallel), then a forward-only step that alone would fit
    # with everything whole.
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n)
    probe = MLP()
    _, probe_step = train(probe, data[:1])
    plan = probe_step.last_plan["plan"]
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n,
                                    memory_limit=plan["memory_bytes"] - 0.3 * plan["weight_bytes"])
    net = MLP()
    train(net, data)
    split = _spmd.info(net.w1)
    assert split is not None, "the training plan did not split w1"
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n)  # no limit now
    x = spora.Tensor(np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32))
    got = spora.jit(lambda t: net(t))(x).asnumpy()
    np.testing.assert_allclose(got, ref(x).asnumpy(), rtol=1e-5, atol=1e-5)
    assert _spmd.info(net.w1) == split  # still this rank's block only
    assert net.w1.asnumpy().size * n == net.w1.shape[0] * net.w1.shape[1]


def test_semi_auto_second_step_with_another_strategy_redistributes():
    n = comm.get_group_size()
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n)
    rng = np.random.default_rng(3)
    w = spora.Parameter(spora.Tensor(rng.standard_normal((16, 8 * n)).astype(np.float32)), name="w")
    whole = w.asnumpy().copy()
    cols = ops.MatMul().shard(((1, 1), (1, n)))  # w split by columns
    rows = ops.MatMul().shard(((1, n), (n, 1)))  # a second step wants it split by rows
    x = rng.standard_normal((4, 16)).astype(np.float32)
    a = spora.jit(lambda t: cols(t, w))(spora.Tensor(x)).asnumpy()
    assert _spmd.info(w)["split"] == [-1, 0]
    b = spora.jit(lambda t: rows(t, w))(spora.Tensor(x)).asnumpy()
    assert _spmd.info(w)["split"] == [-1, 0]  # kept; the step moved its block where the strategy wants it
    np.testing.assert_allclose(a, x @ whole, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, x @ whole, rtol=1e-5, atol=1e-5)
