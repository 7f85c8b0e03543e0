"""enable_parallel_optimizer under semi_auto_parallel (docs/parallel.md,
"Optimizer-state sharding (ZeRO)"): the update ops carry shard_axis=0, so
the SPMD pass stores each optimizer state split by rows over mesh axis 0,
reduce-scatters the gradient into it and all-gathers the new parameter
(ZeRO-2 through the partitioner). Training equals one process; a state
holds 1/N of its rows per rank while its parameter stays whole."""
import numpy as np

import spora
from spora import communication as comm

from test_auto_parallel import MLP, batches, check_equal, train


def test_semi_auto_parallel_optimizer_splits_the_state_and_equals_one_process():
    n = comm.get_group_size()
    data = batches()
    ref = MLP()
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n,
                                    enable_parallel_optimizer=True)
    net = MLP(s1=((n, 1), (1, 1)))  # the batch over the ranks, the weights whole
    losses, step = train(net, data)
    check_equal(ref, ref_losses, net, losses)
    weights = {w["name"]: w for w in step.last_plan["weights"]}
    state = [w for name, w in weights.items() if name.endswith(".w1")]
    assert state, sorted(weights)
    for w in state:  # the momentum of w1: rows split over the ranks
        assert tuple(w["local_shape"]) == (32 // n, 256), w
    assert tuple(weights["w1"]["local_shape"]) == (32, 256)  # the parameter whole
    text = step.last_graph.text()
    assert "reduce_scatter(" in text and "all_gather(" in text, text
    held = sum(int(np.prod(w["local_shape"])) for w in state)
    whole = sum(int(np.prod(w["shape"])) for w in state)
    print(f"\n[parallel optimizer, semi_auto, {n} ranks] w1's state per rank: {held * 4} of {whole * 4} bytes")
    assert held * n == whole


def test_auto_parallel_with_the_parallel_optimizer_equals_one_process():
    """The search plans with the update ops' shard_axis rule (the state of a
    whole parameter split over axis 0) and training still equals one
    process."""
    n = comm.get_group_size()
    data = batches()
    ref = MLP()
    ref_losses, _ = train(ref, data)
    spora.set_auto_parallel_context(parallel_mode="auto_parallel", device_num=n, enable_parallel_optimizer=True)
    net = MLP()
    losses, step = train(net, data)
    check_equal(ref, ref_losses, net, losses)
