"""Semi-automatic parallelism in the frontend (docs/parallel.md): a traced
step is partitioned by the core's SPMD pass (Graph.partition over
spora_graph_partition), and the Parameters the plan splits keep only this
rank's block from then on. Parameters are created whole on every rank (the
same values: seed them alike) and sliced at the first compile; gather()
reassembles the whole value (checkpoints save whole tensors)."""
import json

import numpy as np

from . import _parallel
from ._tensor import Tensor

_axis_comms_cache = {}
_plan_count = [0]  # partitions so far: the latest plan of a network wins


def _comm():
    from . import communication
    return communication._comm()


def _axis_comms(shape):
    """One communicator per mesh axis: the ranks that differ only along it,
    ordered by their coordinate (the world itself for a 1-D mesh)."""
    world = _comm()
    if len(shape) == 1:
        return [world]
    key = (tuple(shape), world.id)
    if key not in _axis_comms_cache:
        coords = np.unravel_index(world.rank, shape)
        comms = []
        for a in range(len(shape)):
            line = list(coords)
            line[a] = 0
            comms.append(world.split(int(np.ravel_multi_index(line, shape)), int(coords[a])))
        _axis_comms_cache[key] = comms
    return _axis_comms_cache[key]


def release_axis_comms():
    """Frees the per-axis communicators (before the world they came from)."""
    for comms in _axis_comms_cache.values():
        for c in comms:
            c.release()
    _axis_comms_cache.clear()


def block(split, shape, mesh_shape, rank):
    """The index (tuple of slices) of `rank`'s block of a tensor of `shape`
    split as `split` (per dim: the mesh axis, -1 whole)."""
    coords = np.unravel_index(rank, mesh_shape)
    index = []
    for d, a in enumerate(split):
        if a < 0:
            index.append(slice(None))
        else:
            b = shape[d] // mesh_shape[a]
            index.append(slice(coords[a] * b, (coords[a] + 1) * b))
    return tuple(index)


def info(p):
    """The sharding of Parameter p ({"shape", "split", "mesh"}), or None."""
    return p.__dict__.get("_spmd") if hasattr(p, "__dict__") else None


def shard_parameter(p, split, global_shape, mesh_shape):
    """Keeps only this rank's block of p (whole until now)."""
    cur = info(p)
    split = [int(a) for a in split]
    if cur is not None:
        if cur["split"] == split and cur["mesh"] == tuple(mesh_shape):
            return
        raise ValueError(f"[parallel] Parameter {p.name!r} is split as {cur['split']} over the mesh {cur['mesh']}; "
                         f"this step's plan wants {split} over {tuple(mesh_shape)}. A later plan keeps the layouts of "
                         "Parameters an earlier one split, so this happens only when the mesh changed: keep "
                         "device_num / mesh_shape the same for every step that uses the network")
    if all(a < 0 for a in split):
        return
    full = p.asnumpy()
    local = np.ascontiguousarray(full[block(split, global_shape, mesh_shape, _comm().rank)])
    p._set_value(Tensor(local, p.dtype, p.device))
    p.__dict__["_spmd"] = {"shape": tuple(global_shape), "split": split, "mesh": tuple(mesh_shape)}


def local_block(p, full):
    """This rank's block of a whole value `full` (numpy) for Parameter p."""
    s = info(p)
    return np.ascontiguousarray(np.asarray(full)[block(s["split"], s["shape"], s["mesh"], _comm().rank)])


def gather(p):
    """The whole value of Parameter p as numpy. Collective when p is split:
    every rank must call it."""
    s = info(p)
    if s is None:
        return p.asnumpy()
    from . import communication
    local = p.asnumpy()
    parts = communication.all_gather(Tensor(local)).asnumpy()
    full = np.empty(s["shape"], dtype=local.dtype)
    for r in range(parts.shape[0]):
        full[block(s["split"], s["shape"], s["mesh"], r)] = parts[r]
    return full


def partition(graph, state, n_out, assigned):
    """Partitions a traced step for this rank (before it is optimised) and
    splits the Parameters the plan splits. Returns the plan (a dict)."""
    from . import communication
    shape, names = _parallel.mesh()
    comms = _axis_comms(shape)
    opts = options(state, n_out, assigned, shape, names, communication.get_rank(), [c.id for c in comms],
                   not _parallel.auto(), _parallel.search_options())
    plan = json.loads(graph.partition(json.dumps(opts)))
    for p, w in zip(state.weights, plan["weights"]):
        shard_parameter(p, w["split"], tuple(w["shape"]), shape)
    search = plan.get("plan")
    if search is not None and not search["fits"]:
        import warnings
        warnings.warn(f"[parallel] auto_parallel: no plan found fits the memory limit of {_size(search['memory_limit'])} "
                      f"per device; the smallest found needs {_size(search['memory_bytes'])} (describe_plan shows it)",
                      RuntimeWarning, stacklevel=3)
    _plan_count[0] += 1
    for p in state.weights:  # describe_plan(net) finds the latest plan through its Parameters
        if hasattr(p, "__dict__"):
            p.__dict__["_spmd_plan"] = (_plan_count[0], plan)
    return plan


def options(state, n_out, assigned, shape, names, rank, groups, semi_auto, search):
    """The options of Graph.partition (spora_graph_partition) for a traced
    step: the mesh, this rank and its per-axis communicators, and `ties`
    (each assigned Parameter's output keeps its weight's layout)."""
    ties = {}
    for k, p in enumerate(assigned):
        name = state.weight_names.get(id(p))
        if name is not None:
            ties[str(n_out + k)] = name
    opts = {"mesh": list(shape), "rank": int(rank), "groups": [int(g) for g in groups], "semi_auto": bool(semi_auto),
            "ties": ties}
    # Parameters an earlier plan split keep their layout (an eval step after
    # the training step, a second jit function over the same network).
    fixed = {}
    for p in state.weights:
        s = info(p)
        name = state.weight_names.get(id(p))
        if s is not None and name is not None and s["mesh"] == tuple(shape):
            fixed[name] = [int(a) for a in s["split"]]
    if fixed:
        opts["weights"] = fixed
    if names:
        opts["axis_names"] = list(names)
    opts.update(search or {})
    return opts


def plan_only(graph, state, n_out, assigned, shape, names, semi_auto, search):
    """Partitions a traced step for rank 0 of a simulated mesh and returns
    the report, touching no Parameter and no communicator: the collectives
    the pass inserts name placeholder groups 1..k (one per mesh axis; ids
    need only be > 0 until the graph is compiled, which it never is:
    spora.parallel.plan). Every rank's plan is the same up to its
    coordinates: layouts split dims evenly."""
    opts = options(state, n_out, assigned, shape, names, 0, list(range(1, len(shape) + 1)), semi_auto, search)
    return json.loads(graph.partition(json.dumps(opts)))


def _size(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(b) < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1024


def plan_of(obj):
    """The latest partition report of obj: a report itself, a compiled step
    (spora.jit: its last_plan), a Model (its network) or a Cell (the latest
    plan holding one of its Parameters)."""
    if isinstance(obj, dict):
        return obj
    if getattr(obj, "last_plan", None) is not None:
        return obj.last_plan
    net = obj
    for attr in ("network", "_network"):  # a Model
        if getattr(obj, attr, None) is not None and not hasattr(obj, "trainable_params"):
            net = getattr(obj, attr)
    if hasattr(net, "trainable_params"):
        found = [p.__dict__["_spmd_plan"] for p in net.trainable_params()
                 if hasattr(p, "__dict__") and "_spmd_plan" in p.__dict__]
        if found:
            return max(found, key=lambda f: f[0])[1]
    raise ValueError(f"[parallel] no partition plan for {type(obj).__name__}: run a compiled training step under "
                     "semi_auto_parallel or auto_parallel first")


def describe(plan):
    """The plan as text: mesh, each weight's layout and local shape, each op's
    decision; under auto_parallel's search also each op's strategy, the
    estimated step time and the memory per device."""
    lines = [f"mesh {tuple(plan['mesh'])}, rank {plan['rank']}"]
    search = plan.get("plan")
    if search:
        fits = "fits" if search["fits"] else "does NOT fit"
        lines.append(f"  search {search['search']}: estimated step {search['step_time_s'] * 1e3:.4g} ms "
                     f"(compute {search['compute_s'] * 1e3:.4g} ms, communication {search['comm_s'] * 1e3:.4g} ms); "
                     f"memory per device {_size(search['memory_bytes'])} (weights {_size(search['weight_bytes'])}, "
                     f"activations {_size(search['activation_bytes'])}), {fits} in {_size(search['memory_limit'])}")
        for op in search["ops"]:
            strategy = f" strategy {op['strategy']!r}" if op["strategy"] else " (no rule: replicated)"
            lines.append(f"  %{op['node']} {op['op']}{strategy}: ({', '.join(op['in'])}) -> ({', '.join(op['out'])}) "
                         f"compute {op['compute_s'] * 1e6:.3g} us, comm {op['comm_s'] * 1e6:.3g} us "
                         f"[{op['candidates']} candidates]")
    for w in plan["weights"]:
        lines.append(f"  weight {w['name']}: {tuple(w['shape'])} {w['layout']} -> local {tuple(w['local_shape'])}")
    lines += ["  " + d for d in plan["decisions"]]
    return "\n".join(lines)
