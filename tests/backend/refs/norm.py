"""References for the "norm" family: log_softmax and the softmax grads,
batch/layer/group norm and their grads, cross_entropy and nll_loss.
(softmax itself is in basic.py.) Everything is computed in float64; saved
statistics are returned in the shapes the ops give the user."""
import numpy as np

from . import ref


def _max(v, ax):
    return np.max(v, axis=ax, keepdims=True, initial=-np.inf)


@ref("log_softmax")
def _log_softmax(x, a):
    v = x[0]
    if v.ndim == 0:
        return [np.zeros_like(v)]
    ax = a.get("axis", -1)
    m = _max(v, ax)
    with np.errstate(divide="ignore"):  # an empty axis sums to 0
        return [v - m - np.log(np.exp(v - m).sum(axis=ax, keepdims=True))]


@ref("softmax_grad")
def _softmax_grad(x, a):
    y, dy = x
    if y.ndim == 0:
        return [y * (dy - dy * y)]
    return [y * (dy - (dy * y).sum(axis=a.get("axis", -1), keepdims=True))]


@ref("log_softmax_grad")
def _log_softmax_grad(x, a):
    y, dy = x
    if y.ndim == 0:
        return [dy - np.exp(y) * dy]
    return [dy - np.exp(y) * dy.sum(axis=a.get("axis", -1), keepdims=True)]


def _quiet(fn):
    """Empty groups give NaN statistics on purpose: no warnings for them."""
    def wrapped(*args):
        with np.errstate(invalid="ignore", divide="ignore"):
            return fn(*args)
    return wrapped


def _bshape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _stats(v, axes):
    n = np.prod([v.shape[i] for i in axes]) if axes else 1
    s = v.sum(axis=axes)
    mean = s / n
    var = ((v - np.expand_dims(mean, axes)) ** 2).sum(axis=axes) / n
    return mean, var, n


@ref("batch_norm")
@_quiet
def _batch_norm(x, a):
    v, g, b, rm, rv = x
    mom, eps = a.get("momentum", 0.1), a.get("eps", 1e-5)
    axes = (0,) + tuple(range(2, v.ndim))
    if a["training"]:
        mean, var, n = _stats(v, axes)
        invstd = 1 / np.sqrt(var + eps)
        if n > 0:
            nrm = (1 - mom) * rm + mom * mean
            nrv = (1 - mom) * rv + mom * var * n / (n - 1)
        else:
            nrm, nrv = rm, rv
    else:
        mean, invstd, nrm, nrv = rm, 1 / np.sqrt(rv + eps), rm, rv
    s = _bshape(v)
    y = (v - mean.reshape(s)) * invstd.reshape(s) * g.reshape(s) + b.reshape(s)
    return [y, mean, invstd, nrm, nrv]


def _norm_grad(v, dy, gam, mean, invstd, axes):
    """dx for one normalisation group per index of the kept dims; `gam` is
    gamma already broadcast against v, mean/invstd with the kept dims."""
    n = np.prod([v.shape[i] for i in axes]) if axes else 1
    xh = (v - mean) * invstd
    ga = dy * gam
    with np.errstate(invalid="ignore", divide="ignore"):
        return invstd * (ga - ga.sum(axis=axes, keepdims=True) / n
                         - xh * (ga * xh).sum(axis=axes, keepdims=True) / n), xh


@ref("batch_norm_grad")
def _batch_norm_grad(x, a):
    v, dy, g, mean, invstd = x
    s = _bshape(v)
    axes = (0,) + tuple(range(2, v.ndim))
    dx, xh = _norm_grad(v, dy, g.reshape(s), mean.reshape(s), invstd.reshape(s), axes)
    return [dx, (dy * xh).sum(axis=axes), dy.sum(axis=axes)]


@ref("layer_norm")
@_quiet
def _layer_norm(x, a):
    v, g, b = x
    k = a.get("normalized_ndim", 1)
    axes = tuple(range(v.ndim - k, v.ndim))
    mean, var, _ = _stats(v, axes)
    invstd = 1 / np.sqrt(var + a.get("eps", 1e-5))
    y = (v - np.expand_dims(mean, axes)) * np.expand_dims(invstd, axes) * g + b
    return [y, mean, invstd]


@ref("layer_norm_grad")
def _layer_norm_grad(x, a):
    v, dy, g, mean, invstd = x
    k = a.get("normalized_ndim", 1)
    axes = tuple(range(v.ndim - k, v.ndim))
    lead = tuple(range(v.ndim - k))
    dx, xh = _norm_grad(v, dy, g, np.expand_dims(mean, axes), np.expand_dims(invstd, axes), axes)
    return [dx, (dy * xh).sum(axis=lead), dy.sum(axis=lead)]


def _grouped(v, groups):
    n, c = v.shape[:2]
    return v.reshape(n, groups, (c // groups) * int(np.prod(v.shape[2:])))


@ref("group_norm")
@_quiet
def _group_norm(x, a):
    v, g, b = x
    groups = a["groups"]
    vg = _grouped(v, groups)
    mean, var, _ = _stats(vg, (2,))
    invstd = 1 / np.sqrt(var + a.get("eps", 1e-5))
    y = ((vg - mean[..., None]) * invstd[..., None]).reshape(v.shape)
    s = _bshape(v)
    return [y * g.reshape(s) + b.reshape(s), mean, invstd]


@ref("group_norm_grad")
def _group_norm_grad(x, a):
    v, dy, g, mean, invstd = x
    groups = a["groups"]
    s = _bshape(v)
    gam = np.broadcast_to(g.reshape(s), v.shape)
    dxg, _ = _norm_grad(_grouped(v, groups), _grouped(dy, groups), _grouped(gam, groups), mean[..., None],
                        invstd[..., None], (2,))
    xh = ((_grouped(v, groups) - mean[..., None]) * invstd[..., None]).reshape(v.shape)
    axes = (0,) + tuple(range(2, v.ndim))
    return [dxg.reshape(v.shape), (dy * xh).sum(axis=axes), dy.sum(axis=axes)]


def _loss(lp, t, a):
    """lp: log-probabilities (N, C, ...) or (C,); t: targets (N, ...) or ()."""
    if lp.ndim == 1:
        lp, t = lp[None], np.asarray(t)[None]
        unbatched = True
    else:
        unbatched = False
    c = lp.shape[1]
    eps = a.get("label_smoothing", 0.0)
    ignore = a.get("ignore_index", -100)
    t = np.asarray(t).astype(np.int64)
    valid = (t >= 0) & (t < c)
    keep = t != ignore
    picked = np.take_along_axis(lp, np.expand_dims(np.where(valid, t, 0), 1), axis=1)[:, 0]
    loss = -(1 - eps) * picked
    if eps > 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            loss = loss - eps * lp.sum(axis=1) / c
    loss = np.where(valid, loss, np.nan)
    loss = np.where(keep, loss, 0.0)
    red = a.get("reduction", "mean")
    if red == "none":
        return [loss[0] if unbatched else loss]
    if red == "sum":
        return [np.asarray(loss.sum())]
    with np.errstate(invalid="ignore", divide="ignore"):
        return [np.asarray(loss.sum() / keep.sum())]


@ref("nll_loss")
def _nll_loss(x, a):
    return _loss(x[0], x[1], a)


@ref("cross_entropy")
def _cross_entropy(x, a):
    v, t = x
    ax = 0 if v.ndim == 1 else 1
    with np.errstate(invalid="ignore", divide="ignore"):
        m = _max(v, ax)
        lp = v - m - np.log(np.exp(v - m).sum(axis=ax, keepdims=True))
    return _loss(lp, t, a)
