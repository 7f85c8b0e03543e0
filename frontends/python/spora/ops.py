"""Functional ops: every op of Spora's registry, plus PyTorch/MindSpore-style
wrappers for the common ones.

``spora.ops.raw.<op>`` is the registry op exactly as its schema says
(positional tensor inputs, keyword attributes checked against the schema's
types, defaults from the schema). ``spora.ops.<op>`` is the same function,
except for the names below that have a friendlier signature
(``conv2d(x, w, bias=None, stride=1, padding=0)``, ``sum(x, axis=None)``...).
Python scalars given as tensor inputs become tensors of the other input's
dtype.
"""
import numpy as np

from . import _C
from . import _dtype as D
from . import _opgen
from ._tensor import Tensor, _call
from ._primitive import (Primitive, MatMul, BatchMatMul, Add, Sub, Mul, Div, BiasAdd, ReLU, GeLU, Tanh,  # noqa: F401
                         Sigmoid, Softmax, LogSoftmax, ReduceSum, ReduceMean, Transpose, Reshape)

_FNS = _opgen.build()
raw = _opgen.namespace(_FNS)
globals().update(_FNS)

__all__ = sorted(_FNS)


def _pair(v):
    if isinstance(v, (int, np.integer)):
        return [int(v), int(v)]
    return [int(x) for x in v]


# -- math -------------------------------------------------------------------------

def matmul(a, b):
    return _C.operand(a, b if isinstance(b, Tensor) else None) @ b


# The binary ops test for a tensor left operand inline: going through
# _as_t (a Python call, then _C.operand) for it was about 15% of an eager
# 1-element add from Python.
def add(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)) + y


def sub(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)) - y


def mul(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)) * y


def div(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)) / y


def pow(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)) ** y


def _as_t(x, other):
    return _C.operand(x, other if isinstance(other, Tensor) else None)


def maximum(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)).maximum(y)


def minimum(x, y):
    return (x if isinstance(x, Tensor) else _as_t(x, y)).minimum(y)


def sum(x, axis=None, keepdims=False, dtype=None):
    return x.sum(axis, keepdims, dtype)


def mean(x, axis=None, keepdims=False):
    return x.mean(axis, keepdims)


def max(x, axis=None, keepdims=False):
    return x.max(axis, keepdims)


def min(x, axis=None, keepdims=False):
    return x.min(axis, keepdims)


def prod(x, axis=None, keepdims=False):
    return x.prod(axis, keepdims)


def argmax(x, axis=None, keepdims=False):
    return x.argmax(axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    return x.argmin(axis, keepdims)


def var(x, axis=None, keepdims=False, ddof=0):
    return x.var(axis, keepdims, ddof)


def std(x, axis=None, keepdims=False, ddof=0):
    return x.std(axis, keepdims, ddof)


def logsumexp(x, axis=None, keepdims=False):
    return x.logsumexp(axis, keepdims)


def clip(x, min=None, max=None):
    return x.clip(min, max)


clamp = clip


def softmax(x, axis=-1, dim=None):
    return x.softmax(axis if dim is None else dim)


def log_softmax(x, axis=-1, dim=None):
    return x.log_softmax(axis if dim is None else dim)


# -- layout -------------------------------------------------------------------------

def reshape(x, shape):
    return x.reshape(shape)


def transpose(x, perm=None):
    return x.transpose(*(perm or ()))


def permute(x, dims):
    return x.transpose(dims)


def flatten(x, start_dim=0, end_dim=-1):
    return x.flatten(start_dim, end_dim)


def squeeze(x, axis=None):
    return x.squeeze(axis)


def expand_dims(x, axis):
    return x.expand_dims(axis)


unsqueeze = expand_dims


def broadcast_to(x, shape):
    return x.broadcast_to(shape)


def tile(x, reps):
    return x.tile(reps)


def flip(x, axis=None):
    return x.flip(axis)


def concat(tensors, axis=0):
    tensors = list(tensors)
    return _call("concat", tensors, axis=int(axis))


cat = concat


def stack(tensors, axis=0):
    return _call("stack", list(tensors), axis=int(axis))


def split(x, split_size_or_sections, axis=0):
    """PyTorch semantics: an int is the size of each chunk (the last may be
    smaller), a list gives the sizes."""
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        k = int(split_size_or_sections)
        sizes = [k] * (n // k) + ([n % k] if n % k else [])
    else:
        sizes = [int(s) for s in split_size_or_sections]
    return _call("split", [x], nout=len(sizes), axis=int(axis), sizes=sizes)


def where(cond, x, y):
    x = _as_t(x, y)
    y = _C.operand(y, x)
    if x.dtype != y.dtype:
        dt = _C.promote(x.dtype, y.dtype)
        x, y = x.astype(dt), y.astype(dt)
    return _call("where", [_C.operand(cond, None), x, y])


def gather(x, indices, axis=0):
    return _call("gather", [x, _C.operand(indices, None)], axis=int(axis))


def one_hot(indices, depth, on_value=1.0, off_value=0.0, dtype=D.float32):
    return _call("one_hot", [indices], depth=int(depth), on_value=float(on_value),
                 off_value=float(off_value), dtype=D.get(dtype).short)


def cast(x, dtype):
    return x.astype(dtype)


# -- creation -------------------------------------------------------------------------

def _creation(op, device, **attrs):
    a = _C.Attrs()
    for k, v in attrs.items():
        if isinstance(v, str):
            a.set_string(k, v)
        elif isinstance(v, (list, tuple)):
            a.set_ints(k, [int(s) for s in v])
        elif isinstance(v, bool):
            a.set_bool(k, v)
        elif isinstance(v, int):
            a.set_int(k, v)
        else:
            a.set_float(k, float(v))
    return _C.call(op, [], a, 1, device)


def _shape(shape):
    return [int(shape)] if isinstance(shape, (int, np.integer)) else [int(s) for s in shape]


def zeros(shape, dtype=D.float32, device=None):
    return _creation("zeros", device, shape=_shape(shape), dtype=D.get(dtype).short)


def ones(shape, dtype=D.float32, device=None):
    return _creation("ones", device, shape=_shape(shape), dtype=D.get(dtype).short)


def full(shape, value, dtype=D.float32, device=None):
    return _creation("full", device, shape=_shape(shape), value=float(value), dtype=D.get(dtype).short)


def zeros_like(x, dtype=None):
    return zeros(x.shape, dtype or x.dtype, x.device)


def ones_like(x, dtype=None):
    return ones(x.shape, dtype or x.dtype, x.device)


def arange(start, stop=None, step=1, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = D.int64 if all_int(start, stop, step) else D.float32
    return _creation("arange", device, start=float(start), stop=float(stop), step=float(step),
                     dtype=D.get(dtype).short)


def all_int(*xs):
    return not any(isinstance(x, float) for x in xs)


def eye(n, m=None, dtype=D.float32, device=None):
    return _creation("eye", device, n=int(n), m=-1 if m is None else int(m), dtype=D.get(dtype).short)


_seed = [0]


def _next_seed(seed):
    if seed is not None:
        return int(seed)
    _seed[0] += 1
    return _seed[0]


def uniform(shape, low=0.0, high=1.0, dtype=D.float32, seed=None, device=None):
    return _creation("uniform", device, shape=_shape(shape), low=float(low), high=float(high),
                     dtype=D.get(dtype).short, seed=_next_seed(seed))


def normal(shape, mean=0.0, std=1.0, dtype=D.float32, seed=None, device=None):
    return _creation("normal", device, shape=_shape(shape), mean=float(mean), std=float(std),
                     dtype=D.get(dtype).short, seed=_next_seed(seed))


def randn(*shape, dtype=D.float32, seed=None, device=None):
    return normal(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape,
                  dtype=dtype, seed=seed, device=device)


# -- neural network ---------------------------------------------------------------------

def linear(x, weight, bias=None):
    """y = x @ weight.T + bias (weight is (out, in), as in PyTorch/MindSpore)."""
    if bias is None:
        return _call("matmul", [x, weight], transpose_b=True)
    return _call("linear", [x, weight, bias])


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NCHW input, OIHW weight. padding: int, (ph, pw), "same" or "valid"."""
    kw = dict(stride=_pair(stride), dilation=_pair(dilation), groups=int(groups))
    if isinstance(padding, str):
        kw["pad_mode"] = padding
    else:
        kw["padding"] = _pair(padding)
    if bias is None:
        return _call("conv2d", [input, weight], **kw)
    return _call("conv2d_bias", [input, weight, bias], **kw)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    return _call("max_pool2d", [input], kernel_size=_pair(kernel_size),
                 stride=_pair(stride if stride is not None else kernel_size), padding=_pair(padding),
                 dilation=_pair(dilation), ceil_mode=bool(ceil_mode))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _call("avg_pool2d", [input], kernel_size=_pair(kernel_size),
                 stride=_pair(stride if stride is not None else kernel_size), padding=_pair(padding),
                 ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad))


def adaptive_avg_pool2d(input, output_size):
    return _call("adaptive_avg_pool2d", [input], output_size=_pair(output_size))


def cross_entropy(logits, target, reduction="mean", label_smoothing=0.0, ignore_index=-100):
    """Softmax cross-entropy of (N, C) logits against class indices (N,)."""
    return _call("cross_entropy", [logits, _C.operand(target, None)], reduction=reduction,
                 label_smoothing=float(label_smoothing), ignore_index=int(ignore_index))


def nll_loss(log_probs, target, reduction="mean", label_smoothing=0.0, ignore_index=-100):
    return _call("nll_loss", [log_probs, _C.operand(target, None)], reduction=reduction,
                 label_smoothing=float(label_smoothing), ignore_index=int(ignore_index))


def mse_loss(x, y, reduction="mean"):
    d = (x - y).square()
    return d.mean() if reduction == "mean" else d.sum() if reduction == "sum" else d


def dropout(x, p=0.5, training=True, seed=None):
    if not training or p == 0:
        return x
    return _call("dropout", [x], nout=2, p=float(p), training=True, seed=_next_seed(seed))[0]


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    shape = x.shape[-nd:]
    if weight is None:
        weight = ones(shape, x.dtype, x.device)
    if bias is None:
        bias = zeros(shape, x.dtype, x.device)
    return _call("layer_norm", [x, weight, bias], nout=3, normalized_ndim=nd, eps=float(eps))[0]


def gelu(x, approximate="none"):
    return _call("gelu", [x], approximate=approximate)


def leaky_relu(x, alpha=0.01):
    return _call("leaky_relu", [x], alpha=float(alpha))


def topk(x, k, axis=-1, largest=True, sorted=True):
    return _call("topk", [x], nout=2, k=int(k), axis=int(axis), largest=bool(largest), sorted=bool(sorted))


def cumsum(x, axis=-1):
    return x.cumsum(axis)


def stop_gradient(x):
    """The value of x, through which no gradient flows (in eager grad and in
    jit alike)."""
    return _C.call("stop_gradient", [x])


# Names whose friendly form replaced the registry op keep the raw one in
# spora.ops.raw.
__all__ = sorted(set(__all__) | {
    "matmul", "sum", "mean", "max", "min", "prod", "argmax", "argmin", "var", "std", "logsumexp", "clip",
    "clamp", "softmax", "log_softmax", "reshape", "transpose", "permute", "flatten", "squeeze", "expand_dims",
    "unsqueeze", "broadcast_to", "tile", "flip", "concat", "cat", "stack", "split", "where", "gather", "one_hot",
    "cast", "zeros", "ones", "full", "zeros_like", "ones_like", "arange", "eye", "uniform", "normal", "randn",
    "linear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "cross_entropy", "nll_loss",
    "mse_loss", "dropout", "layer_norm", "gelu", "leaky_relu", "topk", "cumsum", "stop_gradient", "raw"})

# Sparse tensors (spora.CSRTensor / COOTensor): MindSpore's functional names.
from ._sparse import csr_mm, csr_to_coo, dense_to_sparse_coo, dense_to_sparse_csr  # noqa: E402,F401

__all__ = sorted(set(__all__) | {"csr_mm", "csr_to_coo", "dense_to_sparse_coo", "dense_to_sparse_csr"})

# MindSpore's GradOperation (over spora.grad) and depend.
from ._grad_operation import GradOperation  # noqa: E402,F401


def depend(value, expr):
    """MindSpore's ops.depend: returns value, after expr. Spora runs (or
    traces) Python in program order, so expr, already computed, is done."""
    return value


__all__ = sorted(set(__all__) | {"GradOperation", "depend"})

# MindSpore's primitives beyond the first set (spora._primitive).
from ._primitive import MORE as _MORE_PRIMITIVES  # noqa: E402
from . import _primitive as _prim  # noqa: E402

globals().update({_n: getattr(_prim, _n) for _n in _MORE_PRIMITIVES})
__all__ = sorted(set(__all__) | set(_MORE_PRIMITIVES))
