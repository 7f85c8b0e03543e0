"""Argument checks for the functional ops (spora.ops): each error names the
op and the argument, instead of what a generic conversion would say (the
tensor's own "only integer tensors can be used as an index")."""
import numpy as np

from . import _C
from . import _dtype as D
from ._tensor import Tensor

_INT_DTYPES = (D.int32, D.int64, D.uint8)


def _kind(v):
    """How an argument reads in an error message."""
    if isinstance(v, Tensor):
        return f"a {v.dtype.name} tensor of shape {tuple(v.shape)}"
    return f"a {type(v).__name__} ({v!r})" if isinstance(v, (str, float)) else f"a {type(v).__name__}"


def _int(v, op, arg):
    """v as a Python int, or a TypeError naming the op and the argument (not
    the tensor's own "only integer tensors can be used as an index")."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, Tensor) and v.dtype in _INT_DTYPES and v.size == 1:
        return int(v.item())
    raise TypeError(f"[{op}] {arg} takes an int, got {_kind(v)}")


def _tensor(v, op, arg, like=None):
    """v as a Tensor (a Python scalar takes like's dtype), or a TypeError
    naming the op and the argument."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (bool, int, float, np.integer, np.floating)):
        return _C.operand(v, like)
    if isinstance(v, (np.ndarray, list, tuple)):
        try:
            return Tensor(v)
        except (TypeError, ValueError) as e:
            raise TypeError(f"[{op}] {arg} takes a tensor; {e}") from None
    raise TypeError(f"[{op}] {arg} takes a tensor, got {_kind(v)}")


def _index_tensor(v, op, arg):
    t = _tensor(v, op, arg)
    if t.dtype not in (D.int32, D.int64):
        raise TypeError(f"[{op}] {arg} takes an int32 or int64 tensor of indices, got {_kind(t)}")
    return t
