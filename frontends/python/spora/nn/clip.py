"""Gradient clipping by global norm as a cell (the optimizers also take clip_norm=)."""
import math

from ..ops import raw
from . import _util
from .cell import Cell

_MAX_TENSORS = 63  # clip_by_global_norm: 63 inputs + the norm output within 64


class ClipByGlobalNorm(Cell):
    """construct(grads) -> grads scaled by min(1, max_norm / (norm + 1e-6)),
    norm being the L2 norm of all of them together (PyTorch's
    clip_grad_norm_). The last norm is not kept: ask global_norm() for it."""

    def __init__(self, max_norm):
        super().__init__()
        max_norm = float(max_norm)
        if not math.isfinite(max_norm) or max_norm <= 0:
            raise ValueError(f"[ClipByGlobalNorm] max_norm must be a positive number, got {max_norm}")
        self.max_norm = max_norm

    def construct(self, grads):
        grads = tuple(grads)
        if not grads:
            return grads
        if len(grads) <= _MAX_TENSORS:
            outs = _util.call_op("clip_by_global_norm", grads, len(grads) + 1, max_norm=self.max_norm)
            return tuple(outs[:-1])
        factor = raw.minimum(self.max_norm / (global_norm(grads) + 1e-6), 1.0)
        return tuple(g * factor.astype(g.dtype) for g in grads)

    def extend_repr(self):
        return f"max_norm={self.max_norm}"


def global_norm(tensors):
    """sqrt(sum of squares) over all tensors (scalar Tensor)."""
    tensors = tuple(tensors)
    parts = [raw.global_norm(*tensors[lo:lo + 64]) for lo in range(0, len(tensors), 64)]
    if len(parts) == 1:
        return parts[0]
    total = parts[0] * parts[0]
    for p in parts[1:]:
        total = total + p * p
    return raw.sqrt(total)
