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

auto_parallel: the same partitioning, with the strategies chosen for the
user. search_mode="dynamic_programming" (default) runs the core's strategy
search (a cost model of compute, memory and communication; device_spec,
topology and memory_limit describe the machine); "sharding_propagation"
propagates layouts from the ops the user annotated (the rest follow by
their sharding rules). spora.parallel.describe_plan(net) prints the plan.

enable_parallel_optimizer=True (data_parallel; docs/parallel.md,
"Optimizer-state sharding (ZeRO)"): each rank keeps and updates the
optimizer state of its row block of every parameter whose first dim divides
by the number of ranks, then all-gathers the parameters (spora._zero).
parallel_optimizer_config: {"optimizer_level": "level1" (state only,
default) or "level2" (gradients reduce-scattered too),
"parallel_optimizer_threshold": KB below which a parameter stays
replicated (default 64, MindSpore's)}.
"""
STAND_ALONE = "stand_alone"
DATA_PARALLEL = "data_parallel"
SEMI_AUTO_PARALLEL = "semi_auto_parallel"
AUTO_PARALLEL = "auto_parallel"
_MODES = (STAND_ALONE, DATA_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL)


class ParallelMode:
    """The parallel_mode values by MindSpore's names (spora.ParallelMode,
    mindspore.ParallelMode): set_auto_parallel_context(parallel_mode=
    ParallelMode.DATA_PARALLEL) is parallel_mode="data_parallel". MindSpore's
    HYBRID_PARALLEL is not supported."""
    STAND_ALONE = STAND_ALONE
    DATA_PARALLEL = DATA_PARALLEL
    SEMI_AUTO_PARALLEL = SEMI_AUTO_PARALLEL
    AUTO_PARALLEL = AUTO_PARALLEL


DYNAMIC_PROGRAMMING = "dynamic_programming"
SHARDING_PROPAGATION = "sharding_propagation"
_SEARCH_MODES = (DYNAMIC_PROGRAMMING, SHARDING_PROPAGATION)
# Keys of device_spec and topology (docs/parallel.md, "Cost model").
_DEVICE_KEYS = ("peak_flops", "mem_bandwidth", "memory_bytes")
_TOPOLOGY_KEYS = ("devices_per_node", "intra_bandwidth", "intra_latency", "inter_bandwidth", "inter_latency")
# Pipeline schedules (docs/parallel.md, "Pipeline parallelism").
_SCHEDULERS = ("1f1b", "gpipe")
# parallel_optimizer_config keys (spora._zero).
_OPTIMIZER_LEVELS = ("level1", "level2")
_OPTIMIZER_CONFIG_KEYS = ("optimizer_level", "parallel_optimizer_threshold")

_DEFAULTS = {"parallel_mode": STAND_ALONE, "gradients_mean": False, "device_num": None, "global_rank": None,
             "mesh_shape": None, "axis_names": None, "search_mode": DYNAMIC_PROGRAMMING, "device_spec": None,
             "topology": None, "memory_limit": None, "pipeline_stages": 1, "pipeline_scheduler": "1f1b",
             "pipeline_config": None, "enable_parallel_optimizer": False, "parallel_optimizer_config": None}
_state = dict(_DEFAULTS)


def set_auto_parallel_context(**kwargs):
    """parallel_mode: "stand_alone" (default) or "data_parallel";
    gradients_mean: average (True) or sum (False) the gradients;
    device_num / global_rank: checked against the communicator if given."""
    for k, v in kwargs.items():
        check_option(k, v)
        _state[k] = v


def check_option(k, v):
    """Raises for an unknown option or value (set_auto_parallel_context and
    spora.parallel.plan take the same ones)."""
    if k not in _state:
        raise ValueError(f"[parallel] unknown auto-parallel option {k!r}; known: {', '.join(sorted(_state))}")
    if k == "parallel_mode" and v not in _MODES:
        raise ValueError(f"[parallel] parallel_mode {v!r} is not supported; supported: {', '.join(_MODES)}")
    if k == "search_mode" and v not in _SEARCH_MODES:
        raise ValueError(f"[parallel] search_mode {v!r} is not supported; supported: {', '.join(_SEARCH_MODES)}")
    if k == "pipeline_stages" and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise ValueError(f"[parallel] pipeline_stages must be an int >= 1, got {v!r}")
    if k == "pipeline_scheduler" and v not in _SCHEDULERS:
        raise ValueError(f"[parallel] pipeline_scheduler {v!r} is not supported; supported: {', '.join(_SCHEDULERS)}"
                         + (" (interleaved 1F1B is not implemented: use '1f1b')" if "interleav" in str(v) else ""))
    if k == "pipeline_config" and v is not None:
        bad = [x for x in v if x not in ("pipeline_scheduler", "pipeline_interleave")]
        if bad:
            raise ValueError(f"[parallel] pipeline_config has unknown keys {bad}; known: pipeline_scheduler, "
                             "pipeline_interleave")
        if v.get("pipeline_interleave"):
            raise ValueError("[parallel] pipeline_interleave=True (interleaved 1F1B) is not implemented; "
                             "use pipeline_scheduler '1f1b' or 'gpipe'")
        if "pipeline_scheduler" in v:
            check_option("pipeline_scheduler", v["pipeline_scheduler"])
    if k == "enable_parallel_optimizer" and not isinstance(v, bool):
        raise ValueError(f"[parallel] enable_parallel_optimizer must be True or False, got {v!r}")
    if k == "parallel_optimizer_config" and v is not None:
        _check_optimizer_config(v)
    for key, known in (("device_spec", _DEVICE_KEYS), ("topology", _TOPOLOGY_KEYS)):
        if k == key and v is not None:
            bad = [x for x in v if x not in known]
            if bad:
                raise ValueError(f"[parallel] {key} has unknown keys {bad}; known: {', '.join(known)}")


def _check_optimizer_config(v):
    if not isinstance(v, dict):
        raise ValueError(f"[parallel] parallel_optimizer_config must be a dict, got {type(v).__name__}")
    bad = [x for x in v if x not in _OPTIMIZER_CONFIG_KEYS]
    if bad:
        raise ValueError(f"[parallel] parallel_optimizer_config has unknown keys {bad}; known: "
                         f"{', '.join(_OPTIMIZER_CONFIG_KEYS)}")
    level = v.get("optimizer_level", "level1")
    if level not in _OPTIMIZER_LEVELS:
        raise ValueError(f"[parallel] optimizer_level {level!r} is not supported; supported: "
                         f"{', '.join(_OPTIMIZER_LEVELS)}" + (" (level3, sharding the weights too, is not "
                                                              "implemented)" if level == "level3" else ""))
    t = v.get("parallel_optimizer_threshold", 64)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
        raise ValueError(f"[parallel] parallel_optimizer_threshold must be a number of KB >= 0, got {t!r}")


def get_auto_parallel_context(key):
    if key not in _state:
        raise ValueError(f"[parallel] unknown auto-parallel option {key!r}")
    return _state[key]


def reset_auto_parallel_context():
    _state.clear()
    _state.update(_DEFAULTS)


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


def pipeline_stages():
    """How many pipeline stages (1: no pipeline)."""
    return int(_state["pipeline_stages"])


class alone:
    """with _parallel.alone(): what is compiled inside is this rank's alone
    (a pipeline stage's optimizer update): not partitioned, whatever the
    parallel_mode."""

    def __enter__(self):
        self._mode = _state["parallel_mode"]
        _state["parallel_mode"] = STAND_ALONE

    def __exit__(self, *exc):
        _state["parallel_mode"] = self._mode


def pipeline_scheduler():
    """"1f1b" or "gpipe" (pipeline_config's pipeline_scheduler wins)."""
    cfg = _state["pipeline_config"] or {}
    return cfg.get("pipeline_scheduler", _state["pipeline_scheduler"])


def semi_auto():
    """True under semi_auto_parallel or auto_parallel: compiled steps are partitioned."""
    return _state["parallel_mode"] in (SEMI_AUTO_PARALLEL, AUTO_PARALLEL)


def auto():
    """True under auto_parallel (strategies chosen for the user)."""
    return _state["parallel_mode"] == AUTO_PARALLEL


def search_options():
    """The options of the core's strategy search, or None under
    sharding_propagation (and outside auto_parallel)."""
    if not auto():
        return None
    return search_options_of(_state)


def search_options_of(o):
    """search_options() for the options dict `o` (auto_parallel assumed)."""
    if o["search_mode"] != DYNAMIC_PROGRAMMING:
        return None
    opts = {"search": DYNAMIC_PROGRAMMING}
    if o["device_spec"]:
        opts["device"] = {k: float(v) for k, v in o["device_spec"].items()}
    if o["topology"]:
        opts["topology"] = {k: (int(v) if k == "devices_per_node" else float(v))
                            for k, v in o["topology"].items()}
    if o["memory_limit"] is not None:
        opts["memory_limit"] = float(o["memory_limit"])
    return opts


def mesh():
    """(shape, axis_names) of the device mesh under semi_auto_parallel, after
    checking it against the communicator: its size must be device_num and
    the product of mesh_shape."""
    from . import communication as comm
    if not comm.is_initialized():
        raise RuntimeError(f"[parallel] parallel_mode={_state['parallel_mode']!r} needs spora.communication.init() first")
    size = comm.get_group_size()
    n = _state["device_num"]
    if n is None:
        n = size
    if int(n) != size:
        raise ValueError(f"[parallel] device_num={n} but the launched job has {size} ranks "
                         f"(start it with mpirun -np {n}, or set device_num={size})")
    shape, names = mesh_of(n, _state["mesh_shape"], _state["axis_names"])
    rank = _state["global_rank"]
    if rank is not None and int(rank) != comm.get_rank():
        raise ValueError(f"[parallel] global_rank={rank} but the communicator says {comm.get_rank()}")
    return shape, names


def mesh_of(device_num, mesh_shape, axis_names):
    """(shape, axis_names) of a mesh of device_num devices (a 1-D mesh when
    mesh_shape is None), checked."""
    n = int(device_num)
    if n < 1:
        raise ValueError(f"[parallel] device_num must be >= 1, got {device_num}")
    shape = tuple(int(x) for x in (mesh_shape or (n,)))
    prod = 1
    for x in shape:
        prod *= x
    if prod != n:
        raise ValueError(f"[parallel] mesh_shape={shape} holds {prod} devices but device_num={n}")
    if axis_names is not None and len(axis_names) != len(shape):
        raise ValueError(f"[parallel] axis_names={tuple(axis_names)} names {len(axis_names)} axes but "
                         f"mesh_shape={shape} has {len(shape)}")
    return shape, (tuple(axis_names) if axis_names is not None else None)
