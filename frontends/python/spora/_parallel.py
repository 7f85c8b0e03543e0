"""Parallel training context (MindSpore's set_auto_parallel_context).

    spora.communication.init()
    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    model = spora.train.Model(net, loss, opt)   # averages gradients across ranks

data_parallel: every rank holds the whole model, trains on its shard of
each batch, and all-reduces the gradients before the optimizer step (inside
the compiled step in GRAPH_MODE).

semi_auto_parallel (docs/parallel.md): ops carry strategies
(ops.MatMul().shard(((1, 1), (1, 4)))), compiled steps (spora.jit, Model in
GRAPH_MODE) are partitioned per rank by the core's SPMD pass, and split
Parameters keep only this rank's block. mesh_shape / axis_names (optional)
arrange the device_num ranks as a grid whose axes strategies may name.
"""
STAND_ALONE = "stand_alone"
DATA_PARALLEL = "data_parallel"
SEMI_AUTO_PARALLEL = "semi_auto_parallel"
AUTO_PARALLEL = "auto_parallel"
_MODES = (STAND_ALONE, DATA_PARALLEL, SEMI_AUTO_PARALLEL)

_state = {"parallel_mode": STAND_ALONE, "gradients_mean": False, "device_num": None, "global_rank": None,
          "mesh_shape": None, "axis_names": None}


def set_auto_parallel_context(**kwargs):
    """parallel_mode: "stand_alone" (default) or "data_parallel";
    gradients_mean: average (True) or sum (False) the gradients;
    device_num / global_rank: checked against the communicator if given."""
    for k, v in kwargs.items():
        if k not in _state:
            raise ValueError(f"[parallel] unknown auto-parallel option {k!r}; known: {', '.join(sorted(_state))}")
        if k == "parallel_mode" and v not in _MODES:
            raise ValueError(f"[parallel] parallel_mode {v!r} is not supported; supported: {', '.join(_MODES)} "
                             "(auto_parallel, the strategy search, is not implemented yet)")
        _state[k] = v


def get_auto_parallel_context(key):
    if key not in _state:
        raise ValueError(f"[parallel] unknown auto-parallel option {key!r}")
    return _state[key]


def reset_auto_parallel_context():
    _state.update(parallel_mode=STAND_ALONE, gradients_mean=False, device_num=None, global_rank=None,
                  mesh_shape=None, axis_names=None)


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


def semi_auto():
    """True under semi_auto_parallel: compiled steps are partitioned."""
    return _state["parallel_mode"] == SEMI_AUTO_PARALLEL


def mesh():
    """(shape, axis_names) of the device mesh under semi_auto_parallel, after
    checking it against the communicator: its size must be device_num and
    the product of mesh_shape."""
    from . import communication as comm
    if not comm.is_initialized():
        raise RuntimeError("[parallel] parallel_mode='semi_auto_parallel' needs spora.communication.init() first")
    size = comm.get_group_size()
    n = _state["device_num"]
    if n is None:
        n = size
    if int(n) != size:
        raise ValueError(f"[parallel] device_num={n} but the launched job has {size} ranks "
                         f"(start it with mpirun -np {n}, or set device_num={size})")
    shape = tuple(int(x) for x in (_state["mesh_shape"] or (int(n),)))
    prod = 1
    for x in shape:
        prod *= x
    if prod != int(n):
        raise ValueError(f"[parallel] mesh_shape={shape} holds {prod} devices but device_num={n}")
    names = _state["axis_names"]
    if names is not None and len(names) != len(shape):
        raise ValueError(f"[parallel] axis_names={tuple(names)} names {len(names)} axes but mesh_shape={shape} "
                         f"has {len(shape)}")
    rank = _state["global_rank"]
    if rank is not None and int(rank) != comm.get_rank():
        raise ValueError(f"[parallel] global_rank={rank} but the communicator says {comm.get_rank()}")
    return shape, (tuple(names) if names is not None else None)
