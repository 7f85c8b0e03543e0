"""Parallel training context (MindSpore's set_auto_parallel_context).

    spora.communication.init()
    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    model = spora.train.Model(net, loss, opt)   # averages gradients across ranks

Only data parallelism exists: every rank holds the whole model, trains on
its shard of each batch, and all-reduces the gradients before the optimizer
step (inside the compiled step in GRAPH_MODE).
"""
STAND_ALONE = "stand_alone"
DATA_PARALLEL = "data_parallel"
_MODES = (STAND_ALONE, DATA_PARALLEL)

_state = {"parallel_mode": STAND_ALONE, "gradients_mean": False, "device_num": None, "global_rank": None}


def set_auto_parallel_context(**kwargs):
    """parallel_mode: "stand_alone" (default) or "data_parallel";
    gradients_mean: average (True) or sum (False) the gradients;
    device_num / global_rank: checked against the communicator if given."""
    for k, v in kwargs.items():
        if k not in _state:
            raise ValueError(f"[parallel] unknown auto-parallel option {k!r}; known: {', '.join(sorted(_state))}")
        if k == "parallel_mode" and v not in _MODES:
            raise ValueError(f"[parallel] parallel_mode {v!r} is not supported; supported: {', '.join(_MODES)} "
                             "(semi_auto_parallel and auto_parallel are not implemented)")
        _state[k] = v


def get_auto_parallel_context(key):
    if key not in _state:
        raise ValueError(f"[parallel] unknown auto-parallel option {key!r}")
    return _state[key]


def reset_auto_parallel_context():
    _state.update(parallel_mode=STAND_ALONE, gradients_mean=False, device_num=None, global_rank=None)


def data_parallel():
    """True when gradients must be reduced across ranks (checks that the
    communicator exists and matches device_num / global_rank)."""
    if _state["parallel_mode"] != DATA_PARALLEL:
        return False
    from . import communication as comm
    if not comm.is_initialized():
        raise RuntimeError("[parallel] parallel_mode='data_parallel' needs spora.communication.init() first")
    for key, have in (("device_num", comm.get_group_size()), ("global_rank", comm.get_rank())):
        want = _state[key]
        if want is not None and int(want) != have:
            raise ValueError(f"[parallel] {key}={want} but the communicator says {have}")
    return True
