"""The Python half of spora.Tensor: conversion from host data, indexing,
reductions and the methods that are thin compositions of ops. The class
itself and its arithmetic operators live in the binding (spora._C.Tensor)
so the per-op path stays in C++."""
import builtins as _builtins

import numpy as np

from . import _C
from . import _dtype as D
from ._spellings import mindspore_spellings

Tensor = _C.Tensor

_SUPPORTED_NP = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int32, np.int64,
                                       np.uint8, np.bool_)}


def _as_array(data, code):
    """Host data -> a C-contiguous NumPy array of a dtype spora stores.
    Python floats default to float32 (as in MindSpore and PyTorch); NumPy
    arrays keep their dtype. bfloat16 is produced as float32 (the binding
    casts)."""
    want = D.to_numpy_dtype(D.from_code(code)) if code else None
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        a = np.asarray(data)
    else:
        try:
            a = np.asarray(data)
        except ValueError as e:
            raise TypeError(f"[tensor] cannot make a tensor from this {type(data).__name__}: ragged or "
                            f"mixed data ({e})") from None
        if want is None and a.dtype == np.float64:
            a = a.astype(np.float32)
    if want is not None and a.dtype != want:
        a = a.astype(want)
    if a.dtype not in _SUPPORTED_NP:
        if a.dtype == object:
            raise TypeError(f"[tensor] cannot make a tensor from {type(data).__name__}: ragged or mixed data")
        raise TypeError(f"[tensor] dtype {a.dtype} is not supported by spora (supported: "
                        + ", ".join(d.name for d in D.ALL) + "); convert it first, e.g. .astype(np.int32)")
    return a if a.flags.c_contiguous else np.array(a, order="C")


_C._set_array_helper(_as_array)
_C._set_dtypes([None] + D.ALL, D.dtype_code)


def _call(op, inputs, nout=1, **attrs):
    """Runs op with attributes given by keyword (types taken from the Python
    values). Used by the methods below; user code calls spora.ops."""
    a = None
    if attrs:
        a = _C.Attrs()
        for k, v in attrs.items():
            if isinstance(v, bool):
                a.set_bool(k, v)
            elif isinstance(v, (int, np.integer)):
                a.set_int(k, int(v))
            elif isinstance(v, float):
                a.set_float(k, v)
            elif isinstance(v, str):
                a.set_string(k, v)
            elif isinstance(v, D.DType):
                a.set_string(k, v.short)
            else:
                v = list(v)
                if _builtins.all(isinstance(x, (int, np.integer)) for x in v):
                    a.set_ints(k, [int(x) for x in v])
                else:
                    a.set_floats(k, [float(x) for x in v])
    return _C.call(op, inputs, a, nout)


def _norm_axes(axis, ndim, op="axis"):
    if axis is None:
        return None
    if isinstance(axis, (int, np.integer)) or (isinstance(axis, Tensor) and axis.ndim == 0
                                                and axis.dtype in (D.int32, D.int64, D.uint8)):
        axis = (int(axis),)
    if isinstance(axis, str) or isinstance(axis, float) or (isinstance(axis, Tensor) and (
            axis.dtype not in (D.int32, D.int64, D.uint8) or axis.ndim > 1)):
        raise TypeError(f"[{op}] axis takes an int or a sequence of ints, got "
                        + (f"a {axis.dtype.name} tensor of shape {tuple(axis.shape)}" if isinstance(axis, Tensor)
                           else f"a {type(axis).__name__} ({axis!r})"))
    out = []
    for a in axis:
        if isinstance(a, (float, str)) or isinstance(a, bool):
            raise TypeError(f"[{op}] axis takes an int or a sequence of ints, got {type(a).__name__} {a!r} in it")
        a = int(a)
        if not -ndim <= a < _builtins.max(ndim, 1):
            raise IndexError(f"[{op}] axis {a} is out of range for a {ndim}-d tensor")
        out.append(a % ndim if ndim else 0)
    return out


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(int(s) for s in shape[0])
    return tuple(int(s) for s in shape)


# -- reductions ---------------------------------------------------------------

def _reduce(op, x, axis, keepdims, float_only=False):
    axes = _norm_axes(axis, x.ndim, op)
    if x.ndim == 0:
        return x
    if float_only and not x.dtype.is_floating_point:
        x = x.astype(D.float32)
    elif op in ("sum", "prod") and x.dtype in (D.bool_, D.uint8):
        x = x.astype(D.int64)
    if axes is None:
        axes = list(range(x.ndim))
    return _call(op, [x], axes=axes, keepdims=bool(keepdims))


def sum(self, axis=None, dtype=None, keepdims=False):
    """MindSpore's Tensor.sum order: dtype before keepdims (PyTorch's
    x.sum(dim, True) is refused, not read as a dtype)."""
    if isinstance(dtype, bool):
        raise TypeError("[Tensor.sum] the second argument is dtype (MindSpore's order: sum(axis, dtype, "
                        "keepdims)); give keepdims= by keyword")
    if dtype is not None:
        self = self.astype(dtype)
    return _reduce("sum", self, axis, keepdims)


def mean(self, axis=None, keepdims=False):
    return _reduce("mean", self, axis, keepdims, float_only=True)


def max(self, axis=None, keepdims=False):
    if self.dtype == D.bool_:
        return _reduce("max", self.astype(D.uint8), axis, keepdims).astype(D.bool_)
    return _reduce("max", self, axis, keepdims)


def min(self, axis=None, keepdims=False):
    if self.dtype == D.bool_:
        return _reduce("min", self.astype(D.uint8), axis, keepdims).astype(D.bool_)
    return _reduce("min", self, axis, keepdims)


def prod(self, axis=None, keepdims=False):
    return _reduce("prod", self, axis, keepdims)


def var(self, axis=None, ddof=0, keepdims=False):
    """MindSpore's order: ddof before keepdims."""
    axes = _norm_axes(axis, self.ndim, "var")
    x = self if self.dtype.is_floating_point else self.astype(D.float32)
    return _call("var", [x], axes=axes if axes is not None else list(range(self.ndim)),
                 keepdims=bool(keepdims), correction=int(ddof))


def std(self, axis=None, ddof=0, keepdims=False):
    """MindSpore's order: ddof before keepdims."""
    axes = _norm_axes(axis, self.ndim, "std")
    x = self if self.dtype.is_floating_point else self.astype(D.float32)
    return _call("std", [x], axes=axes if axes is not None else list(range(self.ndim)),
                 keepdims=bool(keepdims), correction=int(ddof))


def _arg(op, x, axis, keepdims):
    if axis is None:
        return _call(op, [x.reshape(-1)], axis=0, keepdims=False)
    return _call(op, [x], axis=int(axis), keepdims=bool(keepdims))


def argmax(self, axis=None, keepdims=False):
    return _arg("argmax", self, axis, keepdims)


def argmin(self, axis=None, keepdims=False):
    return _arg("argmin", self, axis, keepdims)


def all(self, axis=None, keepdims=False):
    return min(self.astype(D.bool_), axis, keepdims)


def any(self, axis=None, keepdims=False):
    return max(self.astype(D.bool_), axis, keepdims)


def cumsum(self, axis=-1):
    return _call("cumsum", [self], axis=int(axis))


def logsumexp(self, axis=None, keepdims=False):
    return _reduce("logsumexp", self, axis, keepdims, float_only=True)


# -- layout ---------------------------------------------------------------------

def reshape(self, *shape):
    shape = _shape_arg(shape)
    if shape == self.shape:
        return self
    return _call("reshape", [self], shape=list(shape))


def flatten(self, start_dim=0, end_dim=-1):
    if self.ndim == 0:
        return self.reshape(1)
    s, e = start_dim % self.ndim, end_dim % self.ndim
    shape = self.shape
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return self.reshape(shape[:s] + (n,) + shape[e + 1:])


def transpose(self, *axes):
    """NumPy / MindSpore semantics: a permutation of all axes (reversed when
    none are given). For PyTorch's transpose(dim0, dim1) use swapaxes."""
    axes = _shape_arg(axes) if axes else tuple(reversed(range(self.ndim)))
    if len(axes) != self.ndim:
        raise ValueError(f"[transpose] {len(axes)} axes given for a {self.ndim}-d tensor; use "
                         f"swapaxes(a, b) to exchange two axes")
    if axes == tuple(range(self.ndim)):
        return self
    return _call("transpose", [self], perm=[a % self.ndim for a in axes])


def permute(self, *dims):
    return transpose(self, *dims)


def swapaxes(self, a, b):
    perm = list(range(self.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(self, perm)


def squeeze(self, axis=None):
    if axis is None:
        axes = [i for i, d in enumerate(self.shape) if d == 1]
    else:
        axes = _norm_axes(axis, self.ndim)
    if not axes:
        return self
    return _call("squeeze", [self], axes=axes)


def expand_dims(self, axis):
    return _call("expand_dims", [self], axes=[int(axis) % (self.ndim + 1)])


def unsqueeze(self, dim):
    return expand_dims(self, dim)


def broadcast_to(self, *shape):
    shape = _shape_arg(shape)
    if shape == self.shape:
        return self
    return _call("broadcast_to", [self], shape=list(shape))


def tile(self, *reps):
    return _call("tile", [self], reps=list(_shape_arg(reps)))


def flip(self, axis=None):
    axes = list(range(self.ndim)) if axis is None else _norm_axes(axis, self.ndim)
    return _call("flip", [self], axes=axes)


# -- math -----------------------------------------------------------------------

def softmax(self, axis=-1):
    return _call("softmax", [self], axis=int(axis))


def log_softmax(self, axis=-1):
    return _call("log_softmax", [self], axis=int(axis))


def clip(self, min=None, max=None):
    kw = {}
    if min is not None:
        kw["min"] = float(min)
    if max is not None:
        kw["max"] = float(max)
    return _call("clip", [self], **kw)


def pow(self, exponent):
    return self ** exponent


def _floordiv(x, y):
    x, y = _C.operand(x, y if isinstance(y, Tensor) else None), _C.operand(y, x if isinstance(x, Tensor) else None)
    dt = _C.promote(x.dtype, y.dtype)
    if dt.is_floating_point:
        return (x.astype(dt) / y.astype(dt)).floor()
    # Integers: exact through float64 below 2**53.
    return (x.astype(D.float64) / y.astype(D.float64)).floor().astype(dt)


def _mod(x, y):
    x, y = _C.operand(x, y if isinstance(y, Tensor) else None), _C.operand(y, x if isinstance(x, Tensor) else None)
    dt = _C.promote(x.dtype, y.dtype)
    x, y = x.astype(dt), y.astype(dt)
    return x - _floordiv(x, y) * y


def _logical(op):
    def f(x, y):
        if not isinstance(x, Tensor):
            x = _C.operand(x, y)
        if not isinstance(y, Tensor):
            y = _C.operand(y, x)
        if x.dtype != D.bool_ or y.dtype != D.bool_:
            raise TypeError(f"[{op}] &, | and ^ take bool tensors (got {x.dtype.name} and {y.dtype.name})")
        return _C.call(op, [x, y])
    return f


def _invert(self):
    if self.dtype != D.bool_:
        raise TypeError("[logical_not] ~ takes a bool tensor")
    return _C.call("logical_not", [self])


# -- indexing -------------------------------------------------------------------

def _is_int(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _expand_index(idx, ndim):
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_ell = _builtins.sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = _builtins.sum(1 for i in idx if i is not None and i is not Ellipsis
                        and not (isinstance(i, (np.ndarray, Tensor)) and i.dtype == np.bool_ and i.ndim > 1))
    for i in idx:  # a multi-dim bool mask consumes several dims
        if isinstance(i, (np.ndarray, Tensor)) and i.dtype == np.bool_ and i.ndim > 1:
            used += i.ndim
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out = []
    for i in idx:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(i)
    if n_ell == 0:
        out.extend([slice(None)] * (ndim - used))
    return out




def _basic(x, idx):
    shape = x.shape
    begin, end, strides, out_shape = [], [], [], []
    d = 0
    sliced = False
    for i in idx:
        if i is None:
            out_shape.append(1)
            continue
        n = shape[d]
        if _is_int(i):
            i = int(i)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            i %= n
            begin.append(i)
            end.append(i + 1)
            strides.append(1)
            sliced = True
        else:
            start, stop, step = i.indices(n)
            if (start, stop, step) != (0, n, 1):
                sliced = True
            cnt = len(range(start, stop, step))
            if cnt == 0:
                start, stop, step = 0, 0, 1
            begin.append(start)
            end.append(stop if stop >= 0 else -(n + 1))
            strides.append(step)
            out_shape.append(cnt)
        d += 1
    y = x
    if sliced:
        y = _call("strided_slice", [x], begin=begin, end=end, strides=strides)
    if tuple(out_shape) != y.shape:
        y = y.reshape(out_shape)
    return y


def _np_index(i):
    """An index element as NumPy (tensors need concrete values)."""
    if isinstance(i, Tensor):
        return i.asnumpy()
    if isinstance(i, (list, tuple)):
        return np.asarray([_np_index(e) for e in i]) if _builtins.any(isinstance(e, Tensor) for e in i) else np.asarray(i)
    return i


def _positions(shape, idx):
    n = 1
    for s in shape:
        n *= s
    pos = np.arange(n, dtype=np.int64).reshape(shape)
    np_idx = tuple(_np_index(i) for i in idx)
    return pos[np_idx if len(np_idx) != 1 else np_idx[0]]


def getitem(self, idx):
    raw = idx if isinstance(idx, tuple) else (idx,)
    if _builtins.all(_is_int(i) or isinstance(i, slice) or i is None or i is Ellipsis for i in raw):
        return _basic(self, _expand_index(idx, self.ndim))
    # One integer tensor on one axis, full slices elsewhere: gather (works on
    # traced indices too).
    full = _expand_index(idx, self.ndim)
    adv = [k for k, i in enumerate(full) if not (isinstance(i, slice) and i == slice(None))]
    if len(adv) == 1 and _builtins.all(i is not None for i in full):
        k = adv[0]
        i = full[k]
        if isinstance(i, Tensor) and i.dtype in (D.int32, D.int64) and i._symbolic:
            return _call("gather", [self, i], axis=k)
    # Everything else (boolean masks, several index arrays, mixes): NumPy
    # computes the flat positions, one gather picks them. Exact NumPy
    # semantics; needs concrete index values.
    pos = _positions(self.shape, raw)
    flat = self.reshape(-1)
    return _call("gather", [flat, Tensor(pos.reshape(-1), device=self.device)], axis=0).reshape(pos.shape)


def setitem(self, idx, value):
    """x[idx] = value, functionally: x takes a new value in which the
    indexed elements are replaced (other tensors made from x earlier keep
    the old one)."""
    raw = idx if isinstance(idx, tuple) else (idx,)
    pos = _positions(self.shape, raw).reshape(-1)
    v = _C.operand(value, self).astype(self.dtype)
    n = pos.shape[0]
    v = v.broadcast_to(_positions(self.shape, raw).shape).reshape(-1) if n else v
    uniq, first_rev = np.unique(pos[::-1], return_index=True)
    if uniq.shape[0] != n:  # repeated positions: the last assignment wins
        keep = np.sort(n - 1 - first_rev)
        v = _call("gather", [v, Tensor(keep.astype(np.int64), device=self.device)], axis=0)
        pos = pos[keep]
    size = self.size
    flat = self.reshape(-1)
    mask = np.zeros(size, dtype=np.bool_)
    mask[pos] = True
    zeros = Tensor(np.zeros(size, dtype=D.to_numpy_dtype(self.dtype)), dtype=self.dtype, device=self.device)
    scattered = _call("scatter_add", [zeros, Tensor(pos.astype(np.int64), device=self.device), v], axis=0)
    new = _call("where", [Tensor(mask, device=self.device), scattered, flat]).reshape(self.shape)
    self._set_value(new)


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self.shape[0]):
        yield self[i]


def _repr(self):
    head = f"shape={list(self.shape)}, dtype={self.dtype.name}, device={self.device}"
    if self._meta:
        lazy = self._lazy_init
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype.name}, init={lazy[0] if lazy else None!r})"
    if self._symbolic:
        return f"Tensor({head}, traced)"
    body = np.array2string(self.asnumpy(), separator=", ", prefix="       ")
    return f"Tensor({head},\n       {body})"


def _format(self, spec):
    """f"{loss:.4f}": a format spec formats a one-element tensor's value (as
    PyTorch does); an empty spec is str(tensor)."""
    if not spec:
        return _repr(self)
    if self.size != 1:
        raise TypeError(f"[tensor] format spec {spec!r} needs a tensor with one element, got shape {self.shape}; "
                        f"format t.asnumpy() instead")
    return format(self.item(), spec)


def _array(self, dtype=None, copy=None):
    a = self.asnumpy()
    return a if dtype is None else a.astype(dtype)


def _reduce_ex(self, protocol):
    # pickle / copy.deepcopy: the value as NumPy, restored on the same device
    if self._meta:
        return (_declared, (self.shape, self.dtype.name, self._lazy_init))
    return (Tensor, (self.asnumpy(), self.dtype.name, self.device))


def _declared(shape, dtype, lazy):
    return Tensor(shape=shape, dtype=D.get(dtype), init=lazy[0] if lazy else None)


# -- tensors declared without data ------------------------------------------------

def init_data(self):
    """This tensor's data: a tensor declared without it (Tensor(shape=,
    dtype=, init=), or under spora.nn.utils.no_init_parameters) returns a new
    Tensor drawn from its initializer now; any other tensor returns itself."""
    if not self._meta:
        return self
    lazy = self._lazy_init
    if lazy is None or lazy[0] is None:
        raise ValueError(f"[init_data] Tensor(shape={self.shape}, dtype={self.dtype.name}) was declared without an "
                         f"initializer; give it data with Tensor(array) instead")
    from .nn import init as _init
    return _init.draw(lazy[0], self.shape, self.dtype)


def _has_init(self):
    """True while the tensor is declared without data and holds the
    initializer init_data() will draw it with (MindSpore's has_init)."""
    return self._meta and self._lazy_init is not None and self._lazy_init[0] is not None


# -- MindSpore's size attributes -------------------------------------------------
# Spora tensors are dense and row-major, so strides follow from the shape.

def _itemsize(self):
    """Bytes per element (MindSpore's Tensor.itemsize)."""
    return self.dtype.itemsize


def _nbytes(self):
    """Bytes the elements take: size * itemsize."""
    return self.size * self.dtype.itemsize


def _strides(self):
    """Bytes to step in each dimension, as NumPy and MindSpore count them
    (the layout is always dense row-major)."""
    out, step = [], self.dtype.itemsize
    for d in reversed(self.shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _from_numpy(array):
    """A Tensor sharing `array`'s memory (no copy), as MindSpore's
    Tensor.from_numpy: writes to the array show in the tensor. The array
    must be C-contiguous and of a dtype Spora stores."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"[Tensor.from_numpy] takes a numpy.ndarray, got {type(array).__name__}; "
                        f"write spora.Tensor(data) to copy other data")
    if not array.flags.c_contiguous:
        raise ValueError("[Tensor.from_numpy] the array is not C-contiguous, so its memory cannot be shared; "
                         "write Tensor.from_numpy(np.ascontiguousarray(a)) or spora.Tensor(a) (a copy)")
    if array.dtype not in _SUPPORTED_NP:
        raise TypeError(f"[Tensor.from_numpy] dtype {array.dtype} is not supported by spora (supported: "
                        + ", ".join(d.name for d in D.ALL) + "); convert it first, e.g. a.astype(np.float32)")
    return _C.from_dlpack(array)


def _item_cast(dt):
    return lambda self: self.astype(dt)


_METHODS = dict(
    sum=sum, mean=mean, max=max, min=min, prod=prod, var=var, std=std, argmax=argmax, argmin=argmin,
    all=all, any=any, cumsum=cumsum, logsumexp=logsumexp,
    reshape=reshape, view=reshape, flatten=flatten, transpose=transpose, permute=permute,
    swapaxes=swapaxes, squeeze=squeeze, unsqueeze=unsqueeze, expand_dims=expand_dims,
    broadcast_to=broadcast_to, expand=broadcast_to, tile=tile, flip=flip,
    softmax=softmax, log_softmax=log_softmax, clip=clip, clamp=clip, pow=pow,
    __floordiv__=lambda a, b: _floordiv(a, b), __rfloordiv__=lambda a, b: _floordiv(b, a),
    __mod__=lambda a, b: _mod(a, b), __rmod__=lambda a, b: _mod(b, a),
    __and__=lambda a, b: _logical("logical_and")(a, b), __rand__=lambda a, b: _logical("logical_and")(b, a),
    __or__=lambda a, b: _logical("logical_or")(a, b), __ror__=lambda a, b: _logical("logical_or")(b, a),
    __xor__=lambda a, b: _logical("logical_xor")(a, b), __rxor__=lambda a, b: _logical("logical_xor")(b, a),
    __invert__=_invert, __pos__=lambda self: self,
    __getitem__=getitem, __setitem__=setitem, __iter__=_iter, __repr__=_repr, __str__=_repr, __format__=_format,
    __array__=_array, __reduce_ex__=_reduce_ex, init_data=init_data,
    float=_item_cast(D.float32), double=_item_cast(D.float64), half=_item_cast(D.float16),
    bfloat16=_item_cast(D.bfloat16), long=_item_cast(D.int64), int=_item_cast(D.int32), bool=_item_cast(D.bool_),
)
_REDUCTIONS = ("sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "all", "any", "logsumexp")
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, mindspore_spellings(_fn) if _name in _REDUCTIONS else _fn)
Tensor.has_init = property(_has_init)
Tensor.itemsize = property(_itemsize)
Tensor.nbytes = property(_nbytes)
Tensor.strides = property(_strides)
Tensor.from_numpy = staticmethod(_from_numpy)
Tensor.T = property(lambda self: transpose(self))
Tensor.mT = property(lambda self: swapaxes(self, -2, -1))
Tensor.__array_ufunc__ = None  # numpy defers to our reflected operators
Tensor.__array_priority__ = 1000
Tensor.__module__ = "spora"
