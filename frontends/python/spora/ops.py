"""Functional ops: every op of Spora's registry, plus wrappers with
MindSpore's functional signatures for the common ones.

``spora.ops.raw.<op>`` is the registry op exactly as its schema says
(positional tensor inputs, keyword attributes checked against the schema's
types, defaults from the schema). ``spora.ops.<op>`` is the same function,
except for the names defined below, which take mindspore.ops' positional
order (``var(x, axis, ddof, keepdims)``, ``conv2d(x, w, bias, stride,
pad_mode, padding, ...)``, ``index_select(x, axis, index)``); what MindSpore
lacks or PyTorch orders otherwise is keyword only, so a positional call
never means something else than in MindSpore (docs/python.md lists the
changes). Python scalars given as tensor inputs become tensors of the other
input's dtype.
"""
import builtins as _builtins

import numpy as np

from . import _C
from . import _dtype as D
from . import _opgen
from ._tensor import Tensor, _call
from ._argcheck import _index_tensor, _int, _kind, _tensor
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

def matmul(a, b, *, transpose_a=False, transpose_b=False):
    """a @ b; transpose_a / transpose_b (keyword only, as MindSpore's
    ops.MatMul attributes) take the last two axes of a / b swapped, without
    a transpose op."""
    if not (transpose_a or transpose_b):
        return _C.operand(a, b if isinstance(b, Tensor) else None) @ b
    a = _tensor(a, "matmul", "a", b if isinstance(b, Tensor) else None)
    b = _tensor(b, "matmul", "b", a)
    return _call("matmul", [a, b], transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


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


def sum(x, axis=None, keepdims=False, *, dtype=None):
    return x.sum(axis, dtype=dtype, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    return x.mean(axis, keepdims)


def max(x, axis=None, keepdims=False):
    """Over all elements (axis None): the maximum. Along an axis: the tuple
    (values, indices), as MindSpore's ops.max and torch.max(x, dim) return
    it; amax gives the values alone (and takes several axes)."""
    if axis is None:
        return x.max(None, keepdims)
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"[max] axis takes one int (the result has the indices along it), got {_kind(axis)}; "
                        f"use ops.amax for the maximum over several axes")
    return x.max(int(axis), keepdims), x.argmax(int(axis), keepdims)


def min(x, axis=None, keepdims=False):
    """Over all elements (axis None): the minimum. Along an axis: the tuple
    (values, indices), as MindSpore's ops.min and torch.min(x, dim)."""
    if axis is None:
        return x.min(None, keepdims)
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"[min] axis takes one int (the result has the indices along it), got {_kind(axis)}; "
                        f"use ops.amin for the minimum over several axes")
    return x.min(int(axis), keepdims), x.argmin(int(axis), keepdims)


def amax(x, axis=None, keepdims=False):
    """The maximum over `axis` (an int, a tuple, or None for all), values
    only (MindSpore / PyTorch amax). The gradient goes to the maximum's
    position (split evenly among tied maxima)."""
    return x.max(axis, keepdims)


def amin(x, axis=None, keepdims=False):
    """The minimum over `axis` (an int, a tuple, or None for all)."""
    return x.min(axis, keepdims)


def prod(x, axis=None, keepdims=False):
    return x.prod(axis, keepdims)


def argmax(x, axis=None, keepdims=False):
    return x.argmax(axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    return x.argmin(axis, keepdims)


def var(x, axis=None, ddof=0, keepdims=False):
    """MindSpore's order: var(x, 1, 1) is ddof=1 (not keepdims)."""
    return x.var(axis, ddof=_int(ddof, "var", "ddof"), keepdims=keepdims)


def std(x, axis=None, ddof=0, keepdims=False):
    """MindSpore's order: std(x, 1, 1) is ddof=1 (not keepdims)."""
    return x.std(axis, ddof=_int(ddof, "std", "ddof"), keepdims=keepdims)


def logsumexp(x, axis=None, keepdims=False):
    return x.logsumexp(axis, keepdims)


# keep_dims= / keepdim= / dim= as MindSpore spells them (_spellings.py).
from ._spellings import mindspore_spellings as _spellings  # noqa: E402

sum, mean, max, min, amax, amin, prod, argmax, argmin, var, std, logsumexp = (  # noqa: A001
    _spellings(f) for f in (sum, mean, max, min, amax, amin, prod, argmax, argmin, var, std, logsumexp))


@_spellings
def all(input, axis=None, keepdims=False):  # noqa: A001 - MindSpore's name (module code uses _builtins.all)
    """True where every element over `axis` (an int, a tuple, or None for all) is nonzero
    (mindspore.ops.all; keep_dims= as MindSpore spells it)."""
    return _tensor(input, "all", "input").all(axis, keepdims)


@_spellings
def any(input, axis=None, keepdims=False):  # noqa: A001 - MindSpore's name (module code uses _builtins.any)
    """True where some element over `axis` is nonzero (mindspore.ops.any)."""
    return _tensor(input, "any", "input").any(axis, keepdims)


def clip(x, min=None, max=None):
    return x.clip(min, max)


clamp = clip


def softmax(x, axis=-1, *, dim=None):
    return x.softmax(_int(axis if dim is None else dim, "softmax", "axis"))


def log_softmax(x, axis=-1, *, dim=None):
    return x.log_softmax(_int(axis if dim is None else dim, "log_softmax", "axis"))


# -- layout -------------------------------------------------------------------------

def reshape(x, shape):
    return x.reshape(shape)


def transpose(x, perm=None):
    return x.transpose(*(perm or ()))


def permute(x, dims):
    return x.transpose(dims)


def swapaxes(x, axis0, axis1):
    """x with axes axis0 and axis1 exchanged (MindSpore ops.swapaxes,
    PyTorch transpose(x, dim0, dim1))."""
    n = x.ndim
    a, b = _int(axis0, "swapaxes", "axis0"), _int(axis1, "swapaxes", "axis1")
    for name, v in (("axis0", a), ("axis1", b)):
        if not -n <= v < _builtins.max(n, 1):
            raise ValueError(f"[swapaxes] {name} {v} is out of range for a {n}-d tensor")
    return x.swapaxes(a % n, b % n) if n else x


swapdims = swapaxes


def flatten(x, order="C", *, start_dim=1, end_dim=-1):
    """MindSpore's ops.flatten: keeps the first axis by default (start_dim=1);
    order is 'C' (row-major; 'F' is not supported). A 0-d or 1-d x becomes
    1-d. Tensor.flatten() flattens all axes, as in MindSpore."""
    if isinstance(order, (int, np.integer)):
        raise TypeError(f"[flatten] the second argument is order ('C'), got {order!r}; give start_dim= "
                        f"and end_dim= by keyword (MindSpore's signature)")
    if order != "C":
        raise ValueError(f"[flatten] order must be 'C' (row-major), got {order!r}")
    if x.ndim <= 1:
        return x.reshape(-1)
    return x.flatten(_int(start_dim, "flatten", "start_dim"), _int(end_dim, "flatten", "end_dim"))


def squeeze(x, axis=None):
    return x.squeeze(axis)


def expand_dims(x, axis):
    return x.expand_dims(_int(axis, "expand_dims", "axis"))


unsqueeze = expand_dims


def broadcast_to(x, shape):
    return x.broadcast_to(shape)


def tile(x, reps):
    return x.tile(reps)


def flip(x, axis=None):
    return x.flip(axis)


def concat(tensors, axis=0):
    tensors = list(tensors)
    return _call("concat", tensors, axis=_int(axis, "concat", "axis"))


cat = concat


def stack(tensors, axis=0):
    return _call("stack", list(tensors), axis=_int(axis, "stack", "axis"))


def split(x, split_size_or_sections, axis=0):
    """PyTorch semantics: an int is the size of each chunk (the last may be
    smaller), a list gives the sizes."""
    axis = _int(axis, "split", "axis")
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        k = _int(split_size_or_sections, "split", "split_size_or_sections")
        sizes = [k] * (n // k) + ([n % k] if n % k else [])
    else:
        sizes = [_int(s, "split", "split_size_or_sections") for s in split_size_or_sections]
    return _call("split", [x], nout=len(sizes), axis=_int(axis, "split", "axis"), sizes=sizes)


def where(cond, x, y):
    x = _as_t(x, y)
    y = _C.operand(y, x)
    if x.dtype != y.dtype:
        dt = _C.promote(x.dtype, y.dtype)
        x, y = x.astype(dt), y.astype(dt)
    return _call("where", [_C.operand(cond, None), x, y])


def gather(x, indices, axis=0):
    return _call("gather", [x, _C.operand(indices, None)], axis=_int(axis, "gather", "axis"))


def gather_elements(input, dim, index):
    """out[p] = input[p with p[dim] = index[p]] (MindSpore's order: dim
    before index; torch.gather(input, dim, index))."""
    if isinstance(dim, Tensor) and isinstance(index, (int, np.integer)):
        raise TypeError("[gather_elements] dim takes an int and index a tensor: MindSpore's order is "
                        "gather_elements(input, dim, index) (ops.raw.gather_elements takes (x, indices, axis=))")
    return _call("gather_elements", [_tensor(input, "gather_elements", "input"),
                                     _index_tensor(index, "gather_elements", "index")],
                 axis=_int(dim, "gather_elements", "dim"))


def index_select(input, axis, index):
    """The entries of `input` at `index` (1-D) along `axis` (MindSpore's
    order: axis before index, as torch.index_select(input, dim, index))."""
    if isinstance(axis, Tensor) and isinstance(index, (int, np.integer)):
        raise TypeError("[index_select] axis takes an int and index a tensor: MindSpore's order is "
                        "index_select(input, axis, index) (ops.raw.index_select takes (x, index, axis=))")
    return _call("index_select", [_tensor(input, "index_select", "input"),
                                  _index_tensor(index, "index_select", "index")],
                 axis=_int(axis, "index_select", "axis"))


def one_hot(indices, depth, on_value=1.0, off_value=0.0, axis=-1, *, dtype=D.float32):
    """MindSpore's order (axis after off_value); dtype is keyword only. The
    new axis of size depth goes at `axis` (-1: last)."""
    idx = _index_tensor(indices, "one_hot", "indices")
    depth = _int(depth, "one_hot", "depth")
    axis = _int(axis, "one_hot", "axis")
    nd = idx.ndim + 1
    if not -nd <= axis < nd:
        raise ValueError(f"[one_hot] axis {axis} is out of range for a {nd}-d result")
    y = _call("one_hot", [idx.reshape(-1)], depth=depth, on_value=float(on_value),
              off_value=float(off_value), dtype=D.get(dtype).short).reshape(tuple(idx.shape) + (depth,))
    axis %= nd
    if axis != nd - 1:
        perm = list(range(nd - 1))
        perm.insert(axis, nd - 1)
        y = y.transpose(perm)
    return y


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


def zeros(shape, dtype=D.float32, *, device=None):
    return _creation("zeros", device, shape=_shape(shape), dtype=D.get(dtype).short)


def ones(shape, dtype=D.float32, *, device=None):
    return _creation("ones", device, shape=_shape(shape), dtype=D.get(dtype).short)


def full(shape, value, dtype=D.float32, *, device=None):
    return _creation("full", device, shape=_shape(shape), value=float(value), dtype=D.get(dtype).short)


def zeros_like(x, dtype=None):
    return zeros(x.shape, dtype or x.dtype, device=x.device)


def ones_like(x, dtype=None):
    return ones(x.shape, dtype or x.dtype, device=x.device)


def arange(start=0, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = D.int64 if all_int(start, stop, step) else D.float32
    return _creation("arange", device, start=float(start), stop=float(stop), step=float(step),
                     dtype=D.get(dtype).short)


def all_int(*xs):
    return not _builtins.any(isinstance(x, float) for x in xs)


def eye(n, m=None, dtype=D.float32, *, device=None):
    return _creation("eye", device, n=int(n), m=-1 if m is None else int(m), dtype=D.get(dtype).short)


_seed = [0]


def _next_seed(seed):
    if seed is not None:
        return int(seed)
    _seed[0] += 1
    return _seed[0]


def uniform(shape, low=0.0, high=1.0, seed=None, *, dtype=D.float32, device=None):
    """MindSpore's order: uniform(shape, minval, maxval, seed); dtype and
    device keyword only."""
    return _creation("uniform", device, shape=_shape(shape), low=float(low), high=float(high),
                     dtype=D.get(dtype).short, seed=_next_seed(seed))


def normal(shape, mean=0.0, std=1.0, seed=None, *, dtype=D.float32, device=None):
    """MindSpore's order: normal(shape, mean, stddev, seed); dtype and device
    keyword only."""
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


_PAD_MODES = ("valid", "same", "pad")


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1):
    """NCHW input, OIHW weight; MindSpore's signature (pad_mode before
    padding). pad_mode 'valid' (no padding), 'same' or 'pad' (explicit
    `padding`: an int, (ph, pw) or (top, bottom, left, right)). A PyTorch
    padding= by keyword works too: a string is the mode, a non-zero size
    implies pad_mode 'pad'."""
    if isinstance(padding, str):
        pad_mode, padding = padding, 0
    if not isinstance(pad_mode, str):
        raise TypeError(f"[conv2d] pad_mode takes 'valid', 'same' or 'pad', got {_kind(pad_mode)}; the fifth "
                        f"argument is pad_mode (MindSpore's order): give padding= by keyword")
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"[conv2d] pad_mode must be 'valid', 'same' or 'pad', got {pad_mode!r}")
    pads = [padding] if isinstance(padding, (int, np.integer)) else list(padding)
    pads = [_int(p, "conv2d", "padding") for p in pads]
    kw = dict(stride=_pair(stride), dilation=_pair(dilation), groups=_int(groups, "conv2d", "groups"))
    if pad_mode == "same":
        if _builtins.any(pads):
            raise ValueError(f"[conv2d] padding must be 0 with pad_mode 'same', got {padding}")
        kw["pad_mode"] = "same"
    else:
        kw["padding"] = pads * 2 if len(pads) == 1 else pads
    if bias is None:
        return _call("conv2d", [input, weight], **kw)
    return _call("conv2d_bias", [input, weight, bias], **kw)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 2-D convolution (PyTorch's F.conv_transpose2d and
    MindSpore's mint.nn.functional.conv_transpose2d, same argument order):
    NCHW input, weight (C_in, C_out/groups, kH, kW), bias (C_out,).
    out = (H-1)*stride - 2*padding + dilation*(k-1) + 1 + output_padding."""
    y = _call("conv2d_transpose", [_tensor(input, "conv_transpose2d", "input"),
                                   _tensor(weight, "conv_transpose2d", "weight")],
              stride=_pair(stride), padding=_pair(padding), output_padding=_pair(output_padding),
              dilation=_pair(dilation), groups=_int(groups, "conv_transpose2d", "groups"))
    if bias is None:
        return y
    bias = _tensor(bias, "conv_transpose2d", "bias")
    if tuple(bias.shape) != (y.shape[1],):
        raise ValueError(f"[conv_transpose2d] bias must have shape ({y.shape[1]},) (the output channels), "
                         f"got {tuple(bias.shape)}")
    return y + bias.reshape(1, -1, 1, 1)


conv2d_transpose = conv_transpose2d


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
    """MindSpore's signature (return_indices before ceil_mode); stride
    defaults to kernel_size. With return_indices=True also returns, per
    output element, the flat index (h * W + w) of the chosen input element
    within its (N, C) plane, int64, as MindSpore and PyTorch do (the first
    maximum of the window in row-major order)."""
    k, st = _pair(kernel_size), _pair(stride if stride is not None else kernel_size)
    pd, dl = _pair(padding), _pair(dilation)
    out = _call("max_pool2d", [input], kernel_size=k, stride=st, padding=pd, dilation=dl, ceil_mode=bool(ceil_mode))
    if not return_indices:
        return out
    return out, _max_pool2d_indices(input, out.shape, k, st, pd, dl)


def _max_pool2d_indices(x, out_shape, k, st, pd, dl):
    """Where max_pool2d's maxima come from: the windows' elements stacked
    (k[0] * k[1] strided views of the input padded with -inf), their argmax,
    and that element's offset added to the window's origin. The indices
    carry no gradient; the values come from the max_pool2d op itself."""
    h, w = x.shape[2], x.shape[3]
    oh, ow = out_shape[2], out_shape[3]
    # Rows and columns the windows reach, the input padded to cover them
    # (ceil_mode's last window may pass the right padding).
    need_h = (oh - 1) * st[0] + dl[0] * (k[0] - 1) + 1
    need_w = (ow - 1) * st[1] + dl[1] * (k[1] - 1) + 1
    xp = pad(x, (pd[1], _builtins.max(0, need_w - w - pd[1]), pd[0], _builtins.max(0, need_h - h - pd[0])),
             value=float("-inf"))
    views, offsets = [], []
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * dl[0], j * dl[1]
            views.append(xp[:, :, r0:r0 + (oh - 1) * st[0] + 1:st[0], c0:c0 + (ow - 1) * st[1] + 1:st[1]])
            offsets.append(r0 * w + c0)
    pick = argmax(stack(views, 0), 0)  # (N, C, OH, OW): which window element
    rows = np.arange(oh, dtype=np.int64) * st[0] - pd[0]
    cols = np.arange(ow, dtype=np.int64) * st[1] - pd[1]
    origin = Tensor(rows[:, None] * w + cols[None, :])  # the window's top-left, as a flat index
    return Tensor(np.asarray(offsets, np.int64))[pick] + origin


def avg_pool2d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=0):
    """MindSpore's ops.avg_pool2d: kernel_size and stride default to 1 (not
    PyTorch's stride=kernel_size: give stride explicitly). divisor_override
    (non-zero) divides each window's sum by it instead of the window size."""
    k = _pair(kernel_size)
    y = _call("avg_pool2d", [input_x], kernel_size=k, stride=_pair(stride), padding=_pair(padding),
              ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad))
    if divisor_override:
        d = _int(divisor_override, "avg_pool2d", "divisor_override")
        if ceil_mode or not count_include_pad:
            raise ValueError("[avg_pool2d] divisor_override needs ceil_mode=False and count_include_pad=True "
                             "(every window then has kernel_size elements)")
        y = y * (k[0] * k[1] / d)
    return y


def adaptive_avg_pool2d(input, output_size):
    return _call("adaptive_avg_pool2d", [input], output_size=_pair(output_size))


# After the registry's names (globals().update above), so these win.
from ._ops_loss import binary_cross_entropy_with_logits, cross_entropy, nll_loss  # noqa: E402,F401
from ._ops_scatter import scatter_add, tensor_scatter_add  # noqa: E402,F401


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
        weight = ones(shape, x.dtype, device=x.device)
    if bias is None:
        bias = zeros(shape, x.dtype, device=x.device)
    return _call("layer_norm", [x, weight, bias], nout=3, normalized_ndim=nd, eps=float(eps))[0]


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalization of (N, C, ...) over num_groups groups of channels
    (MindSpore / PyTorch order: num_groups before weight and bias, each
    (C,), ones and zeros when None)."""
    op = "group_norm"
    x = _tensor(input, op, "input")
    g = _int(num_groups, op, "num_groups")
    if x.ndim < 2:
        raise ValueError(f"[{op}] input must be (N, C, ...), got shape {tuple(x.shape)}")
    c = x.shape[1]
    w = ones((c,), x.dtype, device=x.device) if weight is None else _tensor(weight, op, "weight", x)
    b = zeros((c,), x.dtype, device=x.device) if bias is None else _tensor(bias, op, "bias", x)
    return _call("group_norm", [x, w, b], nout=3, groups=g, eps=float(eps))[0]


def batch_norm(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1, eps=1e-5):
    """Batch normalization of (N, C, ...) in MindSpore's order (running
    statistics before weight and bias; the registry op, ops.raw.batch_norm,
    takes gamma and beta first). In training the batch statistics normalise
    and the running ones move in place, (1 - momentum) * running + momentum
    * batch (the variance unbiased), as in MindSpore and PyTorch."""
    op = "batch_norm"
    x = _tensor(input_x, op, "input_x")
    names = ("running_mean", "running_var", "weight", "bias")
    stats = [_tensor(v, op, n, x) for v, n in zip((running_mean, running_var, weight, bias), names)]
    if x.ndim < 2:
        raise ValueError(f"[{op}] input_x must be (N, C, ...), got shape {tuple(x.shape)}")
    for v, n in zip(stats, names):
        if tuple(v.shape) != (x.shape[1],):
            raise ValueError(f"[{op}] {n} must have shape ({x.shape[1]},) (the channels), got {tuple(v.shape)}")
    rm, rv, w, b = stats
    y, _, _, new_mean, new_var = _call("batch_norm", [x, w, b, rm, rv], nout=5, training=bool(training),
                                       momentum=float(momentum), eps=float(eps))
    if training:
        for old, new, n in ((running_mean, new_mean, "running_mean"), (running_var, new_var, "running_var")):
            if hasattr(old, "assign_value"):  # a Parameter, inside jit too
                old.assign_value(new)
            elif isinstance(old, Tensor) and _C.current_trace() is None:
                old._set_value(new._detach())
            else:
                raise TypeError(f"[{op}] {n} must be a Parameter (or an eager Tensor) to be updated in training, "
                                f"got {_kind(old)}")
    return y


def gelu(x, approximate="none"):
    return _call("gelu", [x], approximate=approximate)


def leaky_relu(input, alpha=0.2):
    """max(x, alpha * x); alpha defaults to 0.2 as in MindSpore (PyTorch's
    negative_slope defaults to 0.01)."""
    return _call("leaky_relu", [input], alpha=float(alpha))


def pad(input_x, padding, mode="constant", value=None):
    """Pads the trailing dims (MindSpore / PyTorch): padding is (left, right)
    for the last dim, then (top, bottom) for the one before, and so on.
    mode: 'constant' (value, 0 by default), 'reflect', 'replicate' or
    'circular' (wraps around: the left pad repeats the dim's end). Negative
    sizes crop."""
    op = "pad"
    x = _tensor(input_x, op, "input_x")
    if isinstance(padding, Tensor):
        padding = padding.asnumpy().tolist()
    if not isinstance(padding, (tuple, list)) or len(padding) % 2:
        raise ValueError(f"[{op}] padding takes an even number of ints ((left, right) per dim from the last), "
                         f"got {padding!r}")
    p = [_int(v, op, "padding") for v in padding]
    nd = len(p) // 2
    if nd > x.ndim:
        raise ValueError(f"[{op}] padding {tuple(p)} pads {nd} dims of a {x.ndim}-d tensor")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"[{op}] mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value is not None and mode != "constant":
        raise ValueError(f"[{op}] value is for mode 'constant' only (mode is {mode!r})")
    per_dim = [(0, 0)] * x.ndim
    for i in range(nd):
        per_dim[x.ndim - 1 - i] = (p[2 * i], p[2 * i + 1])
    # Negative sizes crop first; the rest pads.
    if _builtins.any(b < 0 or a < 0 for b, a in per_dim):
        idx = tuple(_builtins.slice(-_builtins.min(b, 0), n + _builtins.min(a, 0))
                    for (b, a), n in zip(per_dim, x.shape))
        x = x[idx]
        per_dim = [(_builtins.max(b, 0), _builtins.max(a, 0)) for b, a in per_dim]
    if not _builtins.any(b or a for b, a in per_dim):
        return x
    if mode == "circular":
        for d, (b, a) in enumerate(per_dim):
            if not (b or a):
                continue
            n = x.shape[d]
            if b > n or a > n:
                raise ValueError(f"[{op}] circular padding ({b}, {a}) of dim {d} is larger than the dim ({n})")
            parts = []
            if b:
                parts.append(x[(_builtins.slice(None),) * d + (_builtins.slice(n - b, n),)])
            parts.append(x)
            if a:
                parts.append(x[(_builtins.slice(None),) * d + (_builtins.slice(0, a),)])
            x = _call("concat", parts, axis=d)
        return x
    flat = [v for ba in per_dim for v in ba]
    if mode == "constant":
        return _call("pad", [x], pads=flat, mode="constant", value=0.0 if value is None else float(value))
    for d, (b, a) in enumerate(per_dim):
        if mode == "reflect" and (b >= x.shape[d] or a >= x.shape[d]):
            raise ValueError(f"[{op}] reflect padding ({b}, {a}) of dim {d} must be smaller than the dim "
                             f"({x.shape[d]})")
    return _call("pad", [x], pads=flat, mode="reflect" if mode == "reflect" else "edge")


def topk(x, k, axis=-1, largest=True, sorted=True):
    return _call("topk", [x], nout=2, k=_int(k, "topk", "k"), axis=_int(axis, "topk", "axis"),
                 largest=bool(largest), sorted=bool(sorted))


def cumsum(x, axis=-1):
    return x.cumsum(_int(axis, "cumsum", "axis"))


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
    "mse_loss", "dropout", "layer_norm", "gelu", "leaky_relu", "topk", "cumsum", "stop_gradient", "raw",
    "amax", "amin", "swapaxes", "swapdims", "gather_elements", "index_select", "group_norm", "pad",
    "conv_transpose2d", "conv2d_transpose", "binary_cross_entropy_with_logits", "batch_norm"})

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
# all / any stay out of __all__: a star import would hide Python's builtins.
__all__ = sorted(set(__all__) | {"tensor_scatter_add"})

# MindSpore's primitives beyond the first set (spora._primitive).
from ._primitive import MORE as _MORE_PRIMITIVES  # noqa: E402
from . import _primitive as _prim  # noqa: E402

globals().update({_n: getattr(_prim, _n) for _n in _MORE_PRIMITIVES})
__all__ = sorted(set(__all__) | set(_MORE_PRIMITIVES))
