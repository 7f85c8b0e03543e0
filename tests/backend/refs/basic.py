"""References for the first op set: elementwise, matmul, sum/mean, reshape,
transpose, softmax."""
import numpy as np

from . import ref


@ref("neg")
def _neg(x, a):
    return [-x[0]]


@ref("exp")
def _exp(x, a):
    return [np.exp(x[0])]


@ref("log")
def _log(x, a):
    return [np.log(x[0])]


@ref("tanh")
def _tanh(x, a):
    return [np.tanh(x[0])]


@ref("relu")
def _relu(x, a):
    return [np.maximum(x[0], 0)]


@ref("sigmoid")
def _sigmoid(x, a):
    return [1 / (1 + np.exp(-x[0]))]


@ref("add")
def _add(x, a):
    return [x[0] + x[1]]


@ref("sub")
def _sub(x, a):
    return [x[0] - x[1]]


@ref("mul")
def _mul(x, a):
    return [x[0] * x[1]]


@ref("div")
def _div(x, a):
    return [x[0] / x[1]]


@ref("matmul")
def _matmul(x, a):
    p, q = x
    if a.get("transpose_a") and p.ndim >= 2:
        p = np.swapaxes(p, -1, -2)
    if a.get("transpose_b") and q.ndim >= 2:
        q = np.swapaxes(q, -1, -2)
    return [np.matmul(p, q)]


def _axes(a, ndim):
    axes = a.get("axes", [])
    return tuple(axes) if axes else tuple(range(ndim))


@ref("sum")
def _sum(x, a):
    return [np.sum(x[0], axis=_axes(a, x[0].ndim), keepdims=bool(a.get("keepdims", False)))]


@ref("mean")
def _mean(x, a):
    return [np.mean(x[0], axis=_axes(a, x[0].ndim), keepdims=bool(a.get("keepdims", False)))]


@ref("reshape")
def _reshape(x, a):
    return [x[0].reshape(a["shape"])]


@ref("transpose")
def _transpose(x, a):
    perm = a.get("perm") or None
    return [np.transpose(x[0], perm)]


@ref("softmax")
def _softmax(x, a):
    v = x[0]
    if v.ndim == 0:
        return [np.ones_like(v)]
    ax = a.get("axis", -1)
    e = np.exp(v - v.max(axis=ax, keepdims=True, initial=-np.inf))
    return [e / e.sum(axis=ax, keepdims=True)]


@ref("linear")
def _linear(x, a):
    return [x[0] @ x[1].T + x[2]]


@ref("stop_gradient")
def _stop_gradient(x, a):
    return [x[0]]
