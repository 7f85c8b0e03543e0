"""nn.DistributedGradReducer: all-reduces gradients across the ranks of
spora.communication (data-parallel training).

    reducer = nn.DistributedGradReducer(opt.parameters, mean=True)
    loss, grads = grad_fn(x, y)
    opt(reducer(grads))

Under spora.jit the reductions are all_reduce ops of the compiled step
graph; in PyNative mode each runs at once. Every rank must reduce the same
gradients in the same order (they do when they run the same script).
"""
from .. import communication as comm


class DistributedGradReducer:
    """parameters: what the gradients belong to (only their count is
    checked); mean: divide the sum by the number of ranks (MindSpore's
    gradients_mean); None takes the auto-parallel context's setting."""

    def __init__(self, parameters, mean=None, group=None):
        self.parameters = tuple(parameters)
        if mean is None:
            from .._parallel import get_auto_parallel_context
            mean = bool(get_auto_parallel_context("gradients_mean"))
        self.mean = bool(mean)
        self.group = group
        comm._comm(group)  # fails now, not mid-training, without init()

    def __call__(self, grads):
        grads = tuple(grads)
        if len(grads) != len(self.parameters):
            raise ValueError(f"[DistributedGradReducer] {len(grads)} gradients for {len(self.parameters)} parameters")
        if comm.get_group_size(self.group) == 1:
            return grads
        op = comm.ReduceOp.MEAN if self.mean else comm.ReduceOp.SUM
        return tuple(g if g is None else comm.all_reduce(g, op, self.group) for g in grads)
