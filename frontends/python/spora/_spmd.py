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
        raise NotImplementedError(f"[parallel] Parameter {p.name!r} is already split as {cur['split']}; a second "
                                  f"plan splits it as {split} (re-splitting is not supported yet)")
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
    ties = {}
    for k, p in enumerate(assigned):
        name = state.weight_names.get(id(p))
        if name is not None:
            ties[str(n_out + k)] = name
    opts = {"mesh": list(shape), "rank": communication.get_rank(), "groups": [c.id for c in comms],
            "semi_auto": True, "ties": ties}
    if names:
        opts["axis_names"] = list(names)
    plan = json.loads(graph.partition(json.dumps(opts)))
    for p, w in zip(state.weights, plan["weights"]):
        shard_parameter(p, w["split"], tuple(w["shape"]), shape)
    return plan


def describe(plan):
    """The plan as text: mesh, each weight's layout and local shape, each op's decision."""
    lines = [f"mesh {tuple(plan['mesh'])}, rank {plan['rank']}"]
    for w in plan["weights"]:
        lines.append(f"  weight {w['name']}: {tuple(w['shape'])} {w['layout']} -> local {tuple(w['local_shape'])}")
    lines += ["  " + d for d in plan["decisions"]]
    return "\n".join(lines)
