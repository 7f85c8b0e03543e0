"""Tensor methods MindSpore 2.x (and PyTorch) users reach for, composed of
registry ops so that they trace under spora.jit and differentiate
(nonzero, whose output size depends on the values, needs concrete data).

Attached to spora.Tensor at import; a name the class already defines is
left alone, so spora._tensor stays the authority for the core methods.
"""
import builtins as _builtins

import numpy as np

from . import _C
from . import _dtype as D
from ._tensor import Tensor, _call, _norm_axes


def _operand(value, like):
    return value if isinstance(value, Tensor) else _C.operand(value, like)


def _axis(axis, ndim, what):
    a = int(axis)
    if not -ndim <= a < _builtins.max(ndim, 1):
        raise IndexError(f"[{what}] axis {axis} is out of range for a {ndim}-d tensor")
    return a % ndim if ndim else 0


# -- sizes and copies ------------------------------------------------------------------

def numel(self):
    """The number of elements."""
    return self.size


def dim(self):
    return self.ndim


def tolist(self):
    """The values as nested Python lists (a 0-d tensor: a number)."""
    return self.asnumpy().tolist()


def copy(self):
    """A new Tensor holding the same values (assigning into it, t[i] = v,
    leaves this one unchanged)."""
    return _call("reshape", [self], shape=list(self.shape))


def contiguous(self):
    """Spora tensors are always dense row-major: self."""
    return self


def is_contiguous(self):
    return True


def ravel(self):
    return self.reshape(-1)


def view_as(self, other):
    return self.reshape(other.shape)


reshape_as = view_as


def expand_as(self, other):
    return self.broadcast_to(other.shape)


def type_as(self, other):
    return self.astype(other.dtype)


def new_zeros(self, size, dtype=None):
    from . import ops
    return ops.zeros(tuple(size) if not isinstance(size, int) else (size,), dtype=dtype or self.dtype,
                     device=self.device)


def new_ones(self, size, dtype=None):
    from . import ops
    return ops.ones(tuple(size) if not isinstance(size, int) else (size,), dtype=dtype or self.dtype,
                     device=self.device)


# -- comparisons and masks ---------------------------------------------------------------

def _cmp(op):
    def f(self, other):
        return _call(op, [self, _operand(other, self)])
    f.__name__ = op
    return f


def isnan(self):
    return _call("not_equal", [self, self])  # only NaN differs from itself


def isinf(self):
    if not self.dtype.is_floating_point:
        return _call("not_equal", [self, self])  # all False
    return _call("equal", [self.abs(), _C.operand(float("inf"), self)])


def isfinite(self):
    if not self.dtype.is_floating_point:
        return _call("equal", [self, self])
    # x - x is 0 for every finite x and NaN for inf and NaN.
    return _call("equal", [self - self, _C.operand(0.0, self)])


def logical_and(self, other):
    return _call("logical_and", [self.astype(D.bool_), _operand(other, self).astype(D.bool_)])


def logical_or(self, other):
    return _call("logical_or", [self.astype(D.bool_), _operand(other, self).astype(D.bool_)])


def logical_not(self):
    return _call("logical_not", [self.astype(D.bool_)])


def masked_fill(self, mask, value):
    """value where mask is True (mask broadcasts to self), self elsewhere."""
    v = _operand(value, self).astype(self.dtype)
    m = mask if isinstance(mask, Tensor) else Tensor(np.asarray(mask, dtype=np.bool_), device=self.device)
    return _call("where", [m, v.broadcast_to(self.shape) if v.shape != self.shape else v, self])


def negative(self):
    return -self


# -- selection -----------------------------------------------------------------------------

def gather(self, input_indices, axis=0):
    """MindSpore's Tensor.gather(input_indices, axis): numpy take along axis."""
    idx = input_indices if isinstance(input_indices, Tensor) else Tensor(np.asarray(input_indices, np.int64),
                                                                        device=self.device)
    return _call("gather", [self, idx], axis=_axis(axis, self.ndim, "gather"))


def index_select(self, axis, index):
    """MindSpore's Tensor.index_select(axis, index): the entries of the 1-d
    index along axis."""
    idx = index if isinstance(index, Tensor) else Tensor(np.asarray(index, np.int64), device=self.device)
    return _call("index_select", [self, idx], axis=_axis(axis, self.ndim, "index_select"))


def nonzero(self):
    """The indices of the non-zero elements, (count, ndim) int64 (needs
    concrete values: the count depends on them)."""
    if self._symbolic:
        raise _C.UntraceableError("[nonzero] the number of non-zero elements depends on the values: call it "
                                  "outside spora.jit")
    return Tensor(np.argwhere(self.asnumpy()).astype(np.int64), device=self.device)


def topk(self, k, dim=None, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) along dim (default
    the last)."""
    d = -1 if dim is None else dim
    return _call("topk", [self], nout=2, k=int(k), axis=_axis(d, self.ndim, "topk"), largest=bool(largest),
                 sorted=bool(sorted))


def sort(self, axis=-1, descending=False):
    """(sorted values, their indices) along axis, ascending unless
    descending."""
    a = _axis(axis, self.ndim, "sort")
    return _call("topk", [self], nout=2, k=int(self.shape[a]), axis=a, largest=bool(descending), sorted=True)


def split(self, split_size_or_sections, axis=0):
    """A tuple of tensors along axis: equal parts of split_size_or_sections
    elements (the last may be smaller), or parts of the listed sizes."""
    a = _axis(axis, self.ndim, "split")
    n = self.shape[a]
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step <= 0:
            raise ValueError(f"[split] split_size must be positive, got {step}")
        sizes = [_builtins.min(step, n - s) for s in range(0, n, step)]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if _builtins.sum(sizes) != n or _builtins.any(s < 0 for s in sizes):
            raise ValueError(f"[split] sizes {sizes} do not add up to the axis' length {n}")
    out = _call("split", [self], nout=len(sizes), axis=a, sizes=sizes)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def chunk(self, chunks, axis=0):
    """At most `chunks` parts along axis, each ceil(n / chunks) long but the last."""
    if int(chunks) <= 0:
        raise ValueError(f"[chunk] chunks must be positive, got {chunks}")
    n = self.shape[_axis(axis, self.ndim, "chunk")]
    return split(self, _builtins.max(1, -(-n // int(chunks))), axis)


def repeat(self, repeats, axis=None):
    """MindSpore's (NumPy's) repeat: each element repeats[i] times along
    axis (the flattened tensor when axis is None). For PyTorch's repeat
    (copies of the whole tensor) use tile."""
    x = self.reshape(-1) if axis is None else self
    a = 0 if axis is None else _axis(axis, self.ndim, "repeat")
    n = x.shape[a]
    reps = np.broadcast_to(np.asarray(repeats, dtype=np.int64), (n,))
    if np.any(reps < 0):
        raise ValueError(f"[repeat] repeats must be >= 0, got {repeats}")
    idx = np.repeat(np.arange(n, dtype=np.int64), reps)
    return _call("gather", [x, Tensor(idx, device=self.device)], axis=a)


def roll(self, shifts, dims=None):
    """Elements shifted along dims (with wrap-around); dims None rolls the
    flattened tensor."""
    if dims is None:
        return roll(self.reshape(-1), shifts, 0).reshape(self.shape)
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"[roll] {len(shifts)} shifts for {len(dims)} dims")
    out = self
    for s, d in zip(shifts, dims):
        a = _axis(d, self.ndim, "roll")
        n = self.shape[a]
        if n == 0:
            continue
        idx = (np.arange(n, dtype=np.int64) - int(s)) % n
        out = _call("gather", [out, Tensor(idx, device=self.device)], axis=a)
    return out


# -- arithmetic ------------------------------------------------------------------------------

def norm(self, ord=None, dim=None, keepdim=False):
    """Vector norms over dim (all elements when None): ord None or 2 (and
    'fro'), 1, inf, -inf, 0 (the count of non-zeros) or any p."""
    axes = _norm_axes(dim, self.ndim)
    x = self if self.dtype.is_floating_point else self.astype(D.float32)
    kw = dict(axis=axes if axes is not None else None, keepdims=keepdim)
    if ord in (None, 2, "fro"):
        return x.square().sum(**kw).sqrt()
    if ord == 1:
        return x.abs().sum(**kw)
    if ord == float("inf"):
        return x.abs().max(**kw)
    if ord == -float("inf"):
        return x.abs().min(**kw)
    if ord == 0:
        return _call("not_equal", [x, _C.operand(0.0, x)]).astype(x.dtype).sum(**kw)
    if isinstance(ord, str):
        raise ValueError(f"[norm] ord {ord!r} is not supported (matrix norms other than 'fro'); use ord=None, 1, 2, "
                         f"inf or a number")
    p = float(ord)
    return (x.abs() ** p).sum(**kw) ** (1.0 / p)


def diag(self):
    """A 1-d tensor as the diagonal of a square matrix; a 2-d tensor's main
    diagonal."""
    if self.ndim == 1:
        n = self.shape[0]
        from . import ops
        return ops.eye(n, dtype=self.dtype, device=self.device) * self.reshape(1, n)
    if self.ndim == 2:
        m, n = self.shape
        idx = np.arange(_builtins.min(m, n), dtype=np.int64) * (n + 1)
        return _call("gather", [self.reshape(-1), Tensor(idx, device=self.device)], axis=0)
    raise ValueError(f"[diag] takes a 1-d or 2-d tensor, got {self.ndim}-d")


def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """beta * self + alpha * (mat1 @ mat2)."""
    return self * beta + (mat1 @ mat2) * alpha


def lerp(self, end, weight):
    """self + weight * (end - self)."""
    return self + (_operand(end, self) - self) * weight


def outer(self, vec2):
    """The outer product of two 1-d tensors."""
    if self.ndim != 1 or vec2.ndim != 1:
        raise ValueError(f"[outer] takes two 1-d tensors, got {self.ndim}-d and {vec2.ndim}-d")
    return self.reshape(-1, 1) * vec2.reshape(1, -1)


_METHODS = dict(
    numel=numel, nelement=numel, dim=dim, ndimension=dim, tolist=tolist, copy=copy, contiguous=contiguous,
    is_contiguous=is_contiguous, ravel=ravel, view_as=view_as, reshape_as=reshape_as, expand_as=expand_as,
    type_as=type_as, new_zeros=new_zeros, new_ones=new_ones,
    equal=_cmp("equal"), ne=_cmp("not_equal"), gt=_cmp("greater"), ge=_cmp("greater_equal"), lt=_cmp("less"),
    le=_cmp("less_equal"), isnan=isnan, isinf=isinf, isfinite=isfinite, logical_and=logical_and,
    logical_or=logical_or, logical_not=logical_not, masked_fill=masked_fill, negative=negative,
    gather=gather, index_select=index_select, nonzero=nonzero, topk=topk, sort=sort, split=split, chunk=chunk,
    repeat=repeat, roll=roll, norm=norm, diag=diag, addmm=addmm, lerp=lerp, outer=outer,
)
for _name, _fn in _METHODS.items():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)
