"""nn.DistributedGradReducer: all-reduces gradients across the ranks of
spora.communication (data-parallel training).

    reducer = nn.DistributedGradReducer(opt.parameters, mean=True)
    loss, grads = grad_fn(x, y)
    opt(reducer(grads))

Under spora.jit the reductions are all_reduce ops of the compiled step
graph; in PyNative mode each runs at once. Every rank must reduce the same
gradients in the same order (they do when they run the same script).
"""
import numpy as np

from .. import _dtype, communication as comm, ops


class DistributedGradReducer:
    """parameters: what the gradients belong to (only their count is
    checked); mean: divide the sum by the number of ranks (MindSpore's
    gradients_mean); None takes the auto-parallel context's setting.

    Gradients are reduced in buckets: consecutive gradients of one dtype,
    up to bucket_bytes (and 64 tensors, the most one concat takes), are
    flattened into one buffer and reduced by one collective, because each
    collective pays a latency of tens of microseconds however small.

    scatter: an optimizer built under enable_parallel_optimizer (at
    optimizer_level "level2": the gradients of the parameters it shards), or
    flags, one per gradient: those gradients are reduce-scattered along dim
    0 instead, and this rank gets only its row block of the reduced
    gradient (what the sharded optimizer updates)."""

    _MAX_BUCKET_TENSORS = 64

    def __init__(self, parameters, mean=None, group=None, bucket_bytes=32 << 20, scatter=None):
        self.parameters = tuple(parameters)
        from .optim.optimizer import Optimizer
        if isinstance(scatter, Optimizer):
            from .. import _zero
            scatter = _zero.scatter_positions(scatter)
        if scatter is not None and len(scatter) != len(self.parameters):
            raise ValueError(f"[DistributedGradReducer] scatter has {len(scatter)} flags for "
                             f"{len(self.parameters)} parameters")
        self.scatter = tuple(bool(s) for s in scatter) if scatter is not None else None
        if mean is None:
            from .._parallel import get_auto_parallel_context
            mean = bool(get_auto_parallel_context("gradients_mean"))
        self.mean = bool(mean)
        self.group = group
        self.bucket_bytes = int(bucket_bytes)
        comm._comm(group)  # fails now, not mid-training, without init()

    def _buckets(self, grads):
        """Lists of gradient positions; the same on every rank, since it
        depends only on the gradients' order, dtypes and shapes."""
        out, cur, cur_bytes = [], [], 0
        for i, g in enumerate(grads):
            if g is None:
                continue
            nbytes = int(np.prod(g.shape, dtype=np.int64)) * _dtype.get(g.dtype).itemsize
            if cur and (grads[cur[0]].dtype != g.dtype or cur_bytes + nbytes > self.bucket_bytes
                        or len(cur) == self._MAX_BUCKET_TENSORS):
                out.append(cur)
                cur, cur_bytes = [], 0
            cur.append(i)
            cur_bytes += nbytes
        if cur:
            out.append(cur)
        return out

    def __call__(self, grads):
        grads = tuple(grads)
        if len(grads) != len(self.parameters):
            raise ValueError(f"[DistributedGradReducer] {len(grads)} gradients for {len(self.parameters)} parameters")
        if comm.get_group_size(self.group) == 1:
            return grads
        op = comm.ReduceOp.MEAN if self.mean else comm.ReduceOp.SUM
        out = list(grads)
        if self.scatter is not None:  # optimizer-state sharding, level2 (spora._zero)
            from .. import _zero
            out = _zero.reduce_scatter_grads(grads, [i for i, s in enumerate(self.scatter) if s],
                                             comm.get_group_size(self.group), op, self.bucket_bytes)
            grads = tuple(None if s else g for g, s in zip(grads, self.scatter))
        # Under jit, one all_reduce per gradient feeding an update: the
        # compiler buckets them in the order backward makes them and starts
        # each bucket while backward goes on (passes/allreduce_fusion.cpp,
        # bucket size SPORA_ALLREDUCE_BUCKET_MB). Buckets here follow the
        # parameters' order, ready only once all of backward has run; they
        # stay for eager runs and for sharded optimizers (spora._zero),
        # whose gradients are sliced before their update.
        from .. import _C
        from .._parallel import get_auto_parallel_context
        per_grad = (_C.current_trace() is not None and self.scatter is None
                    and not get_auto_parallel_context("enable_parallel_optimizer"))
        for idx in (([i] for i, g in enumerate(grads) if g is not None) if per_grad else self._buckets(grads)):
            if len(idx) == 1:
                out[idx[0]] = comm.all_reduce(grads[idx[0]], op, self.group)
                continue
            sizes = [int(np.prod(grads[i].shape, dtype=np.int64)) for i in idx]
            flat = ops.concat([grads[i].reshape(-1) for i in idx])
            parts = ops.split(comm.all_reduce(flat, op, self.group), sizes)
            for i, part in zip(idx, parts):
                out[i] = part.reshape(grads[i].shape)
        return tuple(out)
