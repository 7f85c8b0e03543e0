"""spora.numpy: MindSpore's mindspore.numpy -- NumPy-named functions on
spora Tensors (`import spora.numpy as mnp`), so they trace under spora.jit
and differentiate. The common part of the API is here: creation,
element-wise math, reductions, shape manipulation, comparisons, dot /
matmul. Names not defined are missing (an AttributeError); everything here
follows NumPy's semantics, with float32 as the default float type as in
MindSpore.
"""
import builtins as _builtins
import math as _math

import numpy as _np

from .. import _C
from .. import _dtype as _D
from .. import ops as _ops
from .._tensor import Tensor as _Tensor

float16, float32, float64, bfloat16 = _D.float16, _D.float32, _D.float64, _D.bfloat16
int32, int64, uint8, bool_ = _D.int32, _D.int64, _D.uint8, _D.bool_
pi, e, inf, nan = _math.pi, _math.e, float("inf"), float("nan")


def _pair(a, b):
    """Two operands as Tensors; a Python number takes the other's dtype."""
    if isinstance(a, _Tensor):
        return a, (b if isinstance(b, _Tensor) else _C.operand(b, a))
    if isinstance(b, _Tensor):
        return _C.operand(a, b), b
    return _Tensor(a), _Tensor(b)


# -- creation ----------------------------------------------------------------------------

def array(obj, dtype=None, copy=True, ndmin=0):
    """A Tensor from a list, NumPy array, number or Tensor (a copy)."""
    t = obj.copy() if isinstance(obj, _Tensor) else _Tensor(obj)
    if dtype is not None:
        t = t.astype(dtype)
    while t.ndim < ndmin:
        t = t.expand_dims(0)
    return t


def asarray(a, dtype=None):
    t = a if isinstance(a, _Tensor) else _Tensor(a)
    return t if dtype is None or t.dtype == dtype else t.astype(dtype)


def zeros(shape, dtype=float32):
    return _ops.zeros(_shape(shape), dtype=dtype)


def ones(shape, dtype=float32):
    return _ops.ones(_shape(shape), dtype=dtype)


def full(shape, fill_value, dtype=None):
    if dtype is None:
        dtype = float32 if isinstance(fill_value, float) else (bool_ if isinstance(fill_value, bool) else int64)
    return _ops.full(_shape(shape), fill_value, dtype=dtype)


def zeros_like(a, dtype=None):
    return zeros(a.shape, dtype or a.dtype)


def ones_like(a, dtype=None):
    return ones(a.shape, dtype or a.dtype)


def full_like(a, fill_value, dtype=None):
    return full(a.shape, fill_value, dtype or a.dtype)


def arange(start, stop=None, step=1, dtype=None):
    return _ops.arange(start, stop, step, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    """num evenly spaced values from start to stop (stop included when
    endpoint)."""
    # The values depend only on the arguments: computed on the host, exactly as NumPy does.
    values = _np.linspace(float(start), float(stop), int(num), endpoint=bool(endpoint))
    return _Tensor(values.astype(_np.float32)) if dtype is None else _Tensor(values, dtype=dtype)


def eye(N, M=None, k=0, dtype=float32):
    if k != 0:
        raise ValueError("[numpy.eye] only k=0 is supported")
    return _ops.eye(N, M, dtype=dtype)


def identity(n, dtype=float32):
    return eye(n, dtype=dtype)


def _shape(shape):
    return (int(shape),) if isinstance(shape, (int, _np.integer)) else tuple(int(s) for s in shape)


# -- element-wise ---------------------------------------------------------------------------

def add(x1, x2):
    a, b = _pair(x1, x2)
    return a + b


def subtract(x1, x2):
    a, b = _pair(x1, x2)
    return a - b


def multiply(x1, x2):
    a, b = _pair(x1, x2)
    return a * b


def divide(x1, x2):
    a, b = _pair(x1, x2)
    if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
        a, b = a.astype(float32), b.astype(float32)  # NumPy's true division of integers
    return a / b


true_divide = divide


def power(x1, x2):
    a, b = _pair(x1, x2)
    return a ** b


def maximum(x1, x2):
    a, b = _pair(x1, x2)
    return a.maximum(b)


def minimum(x1, x2):
    a, b = _pair(x1, x2)
    return a.minimum(b)


def _unary(method):
    def f(x):
        return getattr(asarray(x), method)()
    f.__name__ = method
    return f


exp, log, sqrt, square, sin, cos, tanh, floor, ceil, sign = (_unary(m) for m in (
    "exp", "log", "sqrt", "square", "sin", "cos", "tanh", "floor", "ceil", "sign"))
absolute = abs = _unary("abs")
negative = _unary("neg")
reciprocal = _unary("reciprocal")


def log1p(x):
    return asarray(x).log1p()


def clip(a, a_min, a_max):
    return asarray(a).clip(a_min, a_max)


def where(condition, x, y):
    c = asarray(condition)
    a, b = _pair(x, y)
    return _ops.where(c, a, b)


# -- reductions ---------------------------------------------------------------------------------

def sum(a, axis=None, dtype=None, keepdims=False):
    return asarray(a).sum(axis=axis, keepdims=keepdims, dtype=dtype)


def mean(a, axis=None, keepdims=False):
    return asarray(a).mean(axis=axis, keepdims=keepdims)


def amax(a, axis=None, keepdims=False):
    return _ops.amax(asarray(a), axis, keepdims)


def amin(a, axis=None, keepdims=False):
    return _ops.amin(asarray(a), axis, keepdims)


max = amax
min = amin


def prod(a, axis=None, keepdims=False):
    return asarray(a).prod(axis=axis, keepdims=keepdims)


def std(a, axis=None, ddof=0, keepdims=False):
    return asarray(a).std(axis=axis, ddof=ddof, keepdims=keepdims)


def var(a, axis=None, ddof=0, keepdims=False):
    return asarray(a).var(axis=axis, ddof=ddof, keepdims=keepdims)


def argmax(a, axis=None):
    return asarray(a).argmax(axis)


def argmin(a, axis=None):
    return asarray(a).argmin(axis)


def all(a, axis=None, keepdims=False):
    return asarray(a).all(axis, keepdims)


def any(a, axis=None, keepdims=False):
    return asarray(a).any(axis, keepdims)


def cumsum(a, axis=None):
    t = asarray(a)
    return t.reshape(-1).cumsum(0) if axis is None else t.cumsum(axis)


# -- shapes -----------------------------------------------------------------------------------

def reshape(a, newshape):
    return asarray(a).reshape(_shape(newshape))


def ravel(a):
    return asarray(a).reshape(-1)


def transpose(a, axes=None):
    t = asarray(a)
    return t.transpose() if axes is None else t.transpose(tuple(axes))


def swapaxes(a, axis1, axis2):
    return asarray(a).swapaxes(axis1, axis2)


def expand_dims(a, axis):
    return asarray(a).expand_dims(axis)


def squeeze(a, axis=None):
    return asarray(a).squeeze(axis)


def broadcast_to(array, shape):
    return asarray(array).broadcast_to(_shape(shape))


def concatenate(arrays, axis=0):
    ts = [asarray(t) for t in arrays]
    if axis is None:
        return _ops.concat([t.reshape(-1) for t in ts], axis=0)
    return _ops.concat(ts, axis=axis)


def stack(arrays, axis=0):
    return _ops.stack([asarray(t) for t in arrays], axis=axis)


def hstack(tup):
    ts = [asarray(t) for t in tup]
    return concatenate(ts, axis=0 if ts[0].ndim == 1 else 1)


def vstack(tup):
    ts = [asarray(t) for t in tup]
    return concatenate([t.reshape(1, -1) if t.ndim == 1 else t for t in ts], axis=0)


def split(ary, indices_or_sections, axis=0):
    """NumPy's split: a number of equal sections, or the indices to cut at."""
    t = asarray(ary)
    n = t.shape[axis]
    if isinstance(indices_or_sections, (int, _np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"[numpy.split] an axis of {n} does not divide into {k} equal sections")
        return list(t.split(n // k, axis))
    cuts = [0] + [_builtins.min(int(i), n) for i in indices_or_sections] + [n]
    return list(t.split([_builtins.max(b - a, 0) for a, b in zip(cuts[:-1], cuts[1:])], axis))


def tile(A, reps):
    t = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, _np.integer)) else tuple(int(r) for r in reps)
    while t.ndim < len(reps):
        t = t.expand_dims(0)
    reps = (1,) * (t.ndim - len(reps)) + reps
    return t.tile(reps)


def repeat(a, repeats, axis=None):
    return asarray(a).repeat(repeats, axis)


def flip(m, axis=None):
    return asarray(m).flip(axis)


# -- comparisons ------------------------------------------------------------------------------

def equal(x1, x2):
    a, b = _pair(x1, x2)
    return a == b


def not_equal(x1, x2):
    a, b = _pair(x1, x2)
    return a != b


def greater(x1, x2):
    a, b = _pair(x1, x2)
    return a > b


def greater_equal(x1, x2):
    a, b = _pair(x1, x2)
    return a >= b


def less(x1, x2):
    a, b = _pair(x1, x2)
    return a < b


def less_equal(x1, x2):
    a, b = _pair(x1, x2)
    return a <= b


def isnan(x):
    return asarray(x).isnan()


def isinf(x):
    return asarray(x).isinf()


def isfinite(x):
    return asarray(x).isfinite()


# -- products --------------------------------------------------------------------------------

def matmul(x1, x2):
    a, b = _pair(x1, x2)
    return a @ b


def dot(a, b):
    """NumPy's dot: scalars multiply, 1-d with 1-d is the inner product,
    otherwise a sum over a's last axis and b's second-to-last (matmul for
    2-d; for higher ranks NumPy's dot differs from matmul and is refused)."""
    x, y = _pair(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    if x.ndim == 1 and y.ndim == 1:
        return (x * y).sum()
    if x.ndim <= 2 and y.ndim <= 2:
        return x @ y
    raise ValueError("[numpy.dot] operands of rank > 2 are not supported; use matmul (batched) or tensordot")


def outer(a, b):
    return asarray(a).reshape(-1).outer(asarray(b).reshape(-1))


def inner(a, b):
    x, y = _pair(a, b)
    if x.ndim == 1 and y.ndim == 1:
        return (x * y).sum()
    return x @ y.swapaxes(-1, -2)
