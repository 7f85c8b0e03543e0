"""Optimizer-state sharding (ZeRO; MindSpore's enable_parallel_optimizer),
docs/parallel.md, "Optimizer-state sharding (ZeRO)".

Under data_parallel with set_auto_parallel_context(enable_parallel_optimizer=
True) an optimizer built on N > 1 ranks splits every parameter whose first
dim divides by N (and whose size reaches parallel_optimizer_threshold KB)
into N row blocks: rank r allocates and updates the optimizer state of block
r only. Each step, a rank updates its block of the parameter with its state
shard (the update ops are elementwise per parameter, so block updates equal
the whole update) and the updated blocks are all-gathered into the whole
parameter on every rank. The gradient a rank needs is its block of the
reduced gradient: level1 slices it from the all-reduced one, level2
reduce-scatters it (DistributedGradReducer(scatter=...)), so no rank holds
a whole reduced gradient of a sharded parameter. Other parameters keep a
replicated state and are updated whole, as without sharding.

A state shard is a Parameter of the block's shape, tagged with the whole
shape: save_checkpoint gathers it whole, load_param_into_net takes this
rank's block of a whole value.
"""
import numpy as np

from . import _C, _dtype, _parallel, ops
from .ops import raw
from ._tensor import Tensor

_MAX_CONCAT = 64  # tensors one concat takes


class Sharding:
    """How one optimizer's parameters are sharded on this rank.

    n, rank: the data-parallel world; level: "level1" or "level2";
    sharded[i]: parameter i (in the optimizer's order) is split into n row
    blocks, of which this rank owns block `rank`."""

    def __init__(self, params, n, rank, level, threshold_kb):
        self.n, self.rank, self.level, self.threshold_kb = n, rank, level, threshold_kb
        self.sharded = tuple(_splits(p, n, threshold_kb) for p in params)
        self.shapes = tuple(tuple(p.shape) for p in params)

    def block_shape(self, i):
        s = self.shapes[i]
        return (s[0] // self.n,) + s[1:] if self.sharded[i] else s

    def block(self, x, i):
        """This rank's row block of the whole tensor x of parameter i."""
        rows = self.shapes[i][0] // self.n
        return x[self.rank * rows:(self.rank + 1) * rows]

    def local_grads(self, params, grads, name):
        """Each sharded parameter's gradient as this rank's block: a whole
        (already reduced) gradient is sliced, a block (reduce-scattered) is
        kept. Others must be whole."""
        out = list(grads)
        for i, (p, g) in enumerate(zip(params, grads)):
            if g is None:
                continue
            shape = tuple(g.shape)
            if self.sharded[i] and shape == self.shapes[i]:
                out[i] = self.block(g, i)
            elif shape != self.block_shape(i):
                want = f"{self.shapes[i]} or this rank's block {self.block_shape(i)}" if self.sharded[i] \
                    else f"{self.shapes[i]}"
                raise ValueError(f"[{name}] gradient of {p.name!r} has shape {shape}; expected {want} "
                                 "(enable_parallel_optimizer)")
        return out

    def gather_params(self, params, blocks):
        """Assigns each sharded parameter the all-gather of its updated
        blocks ({position: block}), in buckets (one collective each)."""
        idx = sorted(blocks)
        for bucket in _buckets([blocks[i] for i in idx]):
            pos = [idx[b] for b in bucket]
            flat = [blocks[i].reshape(1, -1) for i in pos]
            whole = all_gather_rows(flat[0] if len(flat) == 1 else ops.concat(flat, axis=1), self.n)
            parts = [whole] if len(pos) == 1 else \
                ops.split(whole, [int(f.shape[1]) for f in flat], axis=1)
            for i, part in zip(pos, parts):
                params[i].assign_value(part.reshape(self.shapes[i]))

    def global_norm(self, grads, local_norm):
        """The L2 norm of the whole gradients from this rank's: blocks of
        the sharded ones (their squared norms summed over ranks) and the
        replicated ones whole. local_norm(list) -> norm of a list."""
        mine = [g for g, s in zip(grads, self.sharded) if s and g is not None]
        rest = [g for g, s in zip(grads, self.sharded) if not s and g is not None]
        total = None
        if mine:
            part = local_norm(mine)
            total = all_reduce_sum(part * part)
        if rest:
            r = local_norm(rest)
            total = r * r if total is None else total + r * r
        return raw.sqrt(total)

    def state_bytes(self, states):
        """(measured, predicted, replicated) optimizer-state bytes on this
        rank: the state Parameters' actual buffers; the formula sum over
        parameters of state-bytes / (n if sharded else 1); and what an
        unsharded optimizer holds."""
        measured = sum(int(np.prod(s.shape, dtype=np.int64)) * _dtype.get(s.dtype).itemsize
                   for ss in states.values() for s in ss)
        predicted = replicated = 0
        for ss in states.values():
            for i, s in enumerate(ss):
                whole = int(np.prod(self.shapes[i], dtype=np.int64)) * _dtype.get(s.dtype).itemsize
                replicated += whole
                predicted += whole // self.n if self.sharded[i] else whole
        return measured, predicted, replicated


def describe(optimizer):
    """Text: per parameter, sharded (its block's shape) or replicated and
    why, and the optimizer-state bytes on this rank (measured from the
    state Parameters, the formula, and the replicated optimizer's)."""
    z = getattr(optimizer, "_zero", None)
    name = type(optimizer).__name__
    if z is None:
        return f"{name}: optimizer state not sharded (enable_parallel_optimizer off, or not data_parallel " \
               "on more than one rank)"
    lines = [f"{name}: optimizer state sharded over {z.n} ranks ({z.level}), this is rank {z.rank}"]
    for i, p in enumerate(optimizer.parameters):
        shape = z.shapes[i]
        if z.sharded[i]:
            what = f"sharded, block {z.block_shape(i)} (rows {z.rank * shape[0] // z.n}:" \
                   f"{(z.rank + 1) * shape[0] // z.n})"
        elif not shape or shape[0] % z.n:
            what = f"replicated (first dim does not divide by {z.n})"
        else:
            what = f"replicated (under parallel_optimizer_threshold {z.threshold_kb:g} KB)"
        lines.append(f"  {p.name} {shape}: {what}")
    measured, predicted, replicated = z.state_bytes(optimizer._states)
    lines.append(f"  state bytes on this rank: {measured} measured, {predicted} predicted, {replicated} replicated")
    return "\n".join(lines)


def _splits(p, n, threshold_kb):
    shape = tuple(p.shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * _dtype.get(p.dtype).itemsize
    return len(shape) >= 1 and shape[0] % n == 0 and nbytes >= threshold_kb * 1024


def spmd_shard_axis():
    """Under semi_auto_parallel / auto_parallel with enable_parallel_optimizer:
    the mesh axis the update ops split each parameter's rows over (its
    state stored so, its gradient reduce-scattered, the new value gathered:
    the core's sgd/adam_update rule, attribute shard_axis); mesh axis 0,
    the data-parallel axis by convention. Else None."""
    if not _parallel.get_auto_parallel_context("enable_parallel_optimizer") or not _parallel.semi_auto():
        return None
    return 0


def sharding_for(optimizer, params):
    """The Sharding an optimizer built now uses, or None (no
    enable_parallel_optimizer, not data_parallel, or one rank)."""
    if not _parallel.get_auto_parallel_context("enable_parallel_optimizer"):
        return None
    name = type(optimizer).__name__
    if _parallel.semi_auto():
        return None  # the SPMD pass splits the state (spmd_shard_axis: the update ops' shard_axis)
    if _parallel.pipeline_stages() > 1:
        raise ValueError(f"[{name}] enable_parallel_optimizer with pipeline_stages > 1 is not implemented "
                         "(each stage would need its own data-parallel group)")
    if not _parallel.data_parallel():
        return None  # stand_alone: one copy of everything anyway
    from . import communication as comm
    n = comm.get_group_size()
    if n == 1:
        return None
    meta = [p.name for p in params if p._meta]
    if meta:
        raise ValueError(f"[{name}] enable_parallel_optimizer needs the parameters' data to shard the state; "
                         f"{meta} were declared without data: call net.init_parameters_data() before "
                         "creating the optimizer")
    cfg = _parallel.get_auto_parallel_context("parallel_optimizer_config") or {}
    return Sharding(params, n, comm.get_rank(), cfg.get("optimizer_level", "level1"),
                    float(cfg.get("parallel_optimizer_threshold", 64)))


def state_value(sharding, i, dtype):
    """Zeros for parameter i's state: its block when sharded."""
    return Tensor(np.zeros(sharding.block_shape(i), dtype))


def tag_state(sharding, i, state):
    """Marks a state Parameter that holds this rank's row block of a whole
    tensor of shape sharding.shapes[i] (save_checkpoint gathers it,
    load_param_into_net slices a whole value)."""
    if sharding.sharded[i]:
        state.__dict__["_zero"] = {"shape": sharding.shapes[i], "n": sharding.n}


def info(p):
    """{"shape": whole shape, "n": ranks} of an optimizer-state shard, or None."""
    return p.__dict__.get("_zero") if hasattr(p, "__dict__") else None


def whole_shape(p):
    """The shape a checkpoint holds for Parameter p (the whole one for a shard)."""
    z = info(p)
    return tuple(z["shape"]) if z is not None else tuple(p.shape)


def gather(p):
    """The whole value of an optimizer-state shard (numpy; collective: every
    rank calls it), or p's value."""
    z = info(p)
    if z is None:
        return p.asnumpy()
    return all_gather_rows(Tensor(p.asnumpy()), z["n"]).asnumpy()


def local_block(p, value):
    """For a shard p and a whole value (Tensor): this rank's row block of it;
    else value itself."""
    z = info(p)
    if z is None or tuple(value.shape) != tuple(z["shape"]):
        return value
    rows = z["shape"][0] // z["n"]
    r = _world().rank
    return Tensor(np.ascontiguousarray(value.asnumpy()[r * rows:(r + 1) * rows]), p.dtype)


def scatter_positions(optimizer):
    """The gradient positions DistributedGradReducer reduce-scatters for
    `optimizer` (level2), or None."""
    z = getattr(optimizer, "_zero", None)
    if z is None or z.level != "level2":
        return None
    return z.sharded


# -- collectives, traced inside spora.jit, at once elsewhere ---------------------


def _world():
    from . import communication as comm
    return comm._comm()


def _traced(x):
    return _C.current_trace() is not None and _C.trace_of(x) is not None


def all_gather_rows(x, n):
    """Every rank's x concatenated along dim 0, in rank order."""
    c = _world()
    if _traced(x):
        a = _C.Attrs()
        a.set_int("axis", 0)
        a.set_int("group", c.id)
        a.set_int("size", n)
        return _C.call("all_gather", [x], a)
    from . import communication as comm
    g = comm.all_gather(x)
    return g.reshape((n * int(x.shape[0]),) + tuple(x.shape[1:]))


def reduce_scatter_rows(x, n, op):
    """Block `rank` along dim 0 of the reduction (op: "sum" / "mean") of
    every rank's x."""
    c = _world()
    if _traced(x):
        a = _C.Attrs()
        a.set_int("axis", 0)
        a.set_int("group", c.id)
        a.set_int("size", n)
        a.set_string("op", op)
        return _C.call("reduce_scatter", [x], a)
    from . import communication as comm
    rows = int(x.shape[0]) // n
    return comm.all_reduce(x, op)[c.rank * rows:(c.rank + 1) * rows]


def all_reduce_sum(x):
    from . import communication as comm
    return comm.all_reduce(x, comm.ReduceOp.SUM)


def _buckets(tensors, bucket_bytes=32 << 20):
    """Runs of consecutive tensors of one dtype, up to bucket_bytes and the
    concat limit; positions into `tensors`."""
    out, cur, cur_bytes = [], [], 0
    for i, t in enumerate(tensors):
        nbytes = int(np.prod(t.shape, dtype=np.int64)) * _dtype.get(t.dtype).itemsize
        if cur and (tensors[cur[0]].dtype != t.dtype or cur_bytes + nbytes > bucket_bytes
                    or len(cur) == _MAX_CONCAT):
            out.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_bytes += nbytes
    if cur:
        out.append(cur)
    return out


def reduce_scatter_grads(grads, positions, n, op, bucket_bytes):
    """grads with those at `positions` replaced by this rank's row block of
    their reduction over the ranks, bucketed: each gradient viewed as (n,
    rows/n * rest) so that concatenating along dim 1 keeps every rank's
    blocks together."""
    out = list(grads)
    pos = [i for i in positions if grads[i] is not None]
    for bucket in _buckets([grads[i] for i in pos], bucket_bytes):
        idx = [pos[b] for b in bucket]
        flat = [grads[i].reshape(n, -1) for i in idx]
        mine = reduce_scatter_rows(flat[0] if len(flat) == 1 else ops.concat(flat, axis=1), n, op)
        parts = [mine] if len(idx) == 1 else ops.split(mine, [int(f.shape[1]) for f in flat], axis=1)
        for i, part in zip(idx, parts):
            shape = tuple(grads[i].shape)
            out[i] = part.reshape((shape[0] // n,) + shape[1:])
    return out
