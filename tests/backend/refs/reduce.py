"""References for reductions, scans and top-k (sum and mean live in basic.py).

Integer results are computed in int64 and wrap when the harness casts them
to the op's dtype, which is the op's wrap-around semantics."""
import numpy as np

from . import ref


def _axes(a, ndim):
    axes = a.get("axes", [])
    if isinstance(axes, int):
        axes = [axes]
    return tuple(axes) if axes else tuple(range(ndim))


def _keep(a):
    return bool(a.get("keepdims", False))


def _wide(v):
    """Integers as int64 (u8 would wrap under negation), floats as float64."""
    return v.astype(np.int64) if v.dtype.kind in "iub" else v


@ref("max")
def _max(x, a):
    return [np.max(x[0], axis=_axes(a, x[0].ndim), keepdims=_keep(a))]


@ref("min")
def _min(x, a):
    return [np.min(x[0], axis=_axes(a, x[0].ndim), keepdims=_keep(a))]


@ref("prod")
def _prod(x, a):
    v = _wide(x[0])
    return [np.prod(v, axis=_axes(a, v.ndim), keepdims=_keep(a))]


@ref("logsumexp")
def _logsumexp(x, a):
    v, axes = x[0], _axes(a, x[0].ndim)
    if v.size == 0 or any(v.shape[i] == 0 for i in axes):
        shape = np.sum(v, axis=axes, keepdims=_keep(a)).shape
        return [np.full(shape, -np.inf)]
    m = np.max(v, axis=axes, keepdims=True)
    with np.errstate(invalid="ignore"):
        safe = np.where(np.isfinite(m), m, 0.0)
        out = safe + np.log(np.sum(np.exp(v - safe), axis=axes, keepdims=True))
    out = np.where(np.isfinite(m), out, m)
    return [out if _keep(a) else np.squeeze(out, axis=axes)]


def _var(x, a):
    with np.errstate(divide="ignore", invalid="ignore"):
        v, axes = x[0], _axes(a, x[0].ndim)
        n = int(np.prod([v.shape[i] for i in axes])) if axes else 1
        dev = v - np.mean(v, axis=axes, keepdims=True)
        sq = np.sum(dev * dev, axis=axes, keepdims=_keep(a))
        return sq / max(n - int(a.get("correction", 0)), 0)


@ref("var")
def _var_ref(x, a):
    return [_var(x, a)]


@ref("std")
def _std(x, a):
    return [np.sqrt(_var(x, a))]


def _arg(fn, x, a):
    axis = a.get("axis")
    return [fn(x[0], axis=axis, keepdims=_keep(a)).astype(np.int64)]


@ref("argmax")
def _argmax(x, a):
    return _arg(np.argmax, x, a)


@ref("argmin")
def _argmin(x, a):
    return _arg(np.argmin, x, a)


@ref("cumsum")
def _cumsum(x, a):
    v = _wide(x[0])
    shape = v.shape
    if v.ndim == 0:
        v = v.reshape(1)
    ax = a.get("axis", -1) % v.ndim
    if a.get("reverse"):
        v = np.flip(v, ax)
    c = np.cumsum(v, axis=ax)
    if a.get("exclusive"):
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=ax)), np.delete(c, -1, axis=ax)], axis=ax) \
            if c.shape[ax] else c
    if a.get("reverse"):
        c = np.flip(c, ax)
    return [c.reshape(shape)]


@ref("topk")
def _topk(x, a):
    v = _wide(x[0])
    shape = v.shape
    if v.ndim == 0:
        v = v.reshape(1)
    k = int(a["k"])
    ax = a.get("axis", -1) % v.ndim
    largest = a.get("largest", True)
    # A stable sort on (NaN rank, value key) gives ties to the lower index;
    # NaN counts as larger than every number.
    vm = np.moveaxis(v, ax, -1)
    nan = np.isnan(vm) if vm.dtype.kind == "f" else np.zeros(vm.shape, bool)
    val = np.where(nan, 0, vm)
    order = np.lexsort((-val, ~nan) if largest else (val, nan), axis=-1)
    idx = order[..., :k]
    if not a.get("sorted", True):
        idx = np.sort(idx, axis=-1)
    vals = np.take_along_axis(vm, idx, axis=-1)
    idx, vals = np.moveaxis(idx, -1, ax), np.moveaxis(vals, -1, ax)
    out_shape = list(shape)
    if out_shape:
        out_shape[ax] = k
    return [vals.reshape(out_shape), idx.astype(np.int64).reshape(out_shape)]
