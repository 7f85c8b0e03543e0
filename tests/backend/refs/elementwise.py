"""References for the elementwise family beyond basic.py's (neg, exp, log,
tanh, relu, sigmoid, add, sub, mul, div live there).

Float inputs arrive as float64 values of the rounded storage; integer and
bool inputs in their own numpy dtype, so integer results wrap like Spora's.
"""
import math

import numpy as np

import harness as H

from . import ref

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


@ref("abs")
def _abs(x, a):
    return [np.abs(x[0])]


@ref("sign")
def _sign(x, a):
    return [np.sign(x[0])]


@ref("square")
def _square(x, a):
    return [x[0] * x[0]]


@ref("log1p")
def _log1p(x, a):
    return [np.log1p(x[0])]


@ref("sqrt")
def _sqrt(x, a):
    return [np.sqrt(x[0])]


@ref("rsqrt")
def _rsqrt(x, a):
    return [1 / np.sqrt(x[0])]


@ref("reciprocal")
def _reciprocal(x, a):
    return [1 / x[0]]


@ref("sin")
def _sin(x, a):
    return [np.sin(x[0])]


@ref("cos")
def _cos(x, a):
    return [np.cos(x[0])]


@ref("erf")
def _erf_ref(x, a):
    return [_erf(x[0])]


@ref("floor")
def _floor(x, a):
    return [np.floor(x[0])]


@ref("ceil")
def _ceil(x, a):
    return [np.ceil(x[0])]


@ref("round")
def _round(x, a):
    return [np.round(x[0])]  # halves to even


@ref("leaky_relu")
def _leaky_relu(x, a):
    alpha = a.get("alpha", 0.01)
    return [np.where(x[0] < 0, x[0] * alpha, x[0])]


@ref("gelu")
def _gelu(x, a):
    v = x[0]
    # Forms that do not cancel to 0 for very negative x.
    if a.get("approximate", "none") == "tanh":
        u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)
        with np.errstate(over="ignore"):
            return [v / (1 + np.exp(-2 * u))]  # 0.5 v (1 + tanh(u))
    return [0.5 * v * _erfc(-v / math.sqrt(2))]


@ref("silu")
def _silu(x, a):
    return [x[0] / (1 + np.exp(-x[0]))]


@ref("softplus")
def _softplus(x, a):
    beta, threshold = a.get("beta", 1.0), a.get("threshold", 20.0)
    bx = x[0] * beta
    with np.errstate(over="ignore"):
        soft = np.log1p(np.exp(bx)) / beta
    return [np.where(bx > threshold, x[0], soft)]


@ref("clip")
def _clip(x, a):
    v = x[0]
    lo, hi = a.get("min", -np.inf), a.get("max", np.inf)
    if v.dtype.kind in "iu":  # integer bounds, saturated to the dtype's range
        info = np.iinfo(v.dtype)
        lo = int(np.clip(math.ceil(lo), info.min, info.max)) if np.isfinite(lo) else info.min
        hi = int(np.clip(math.floor(hi), info.min, info.max)) if np.isfinite(hi) else info.max
        return [np.minimum(np.maximum(v, v.dtype.type(lo)), v.dtype.type(hi))]
    return [np.minimum(np.maximum(v, lo), hi)]


@ref("logical_not")
def _logical_not(x, a):
    return [np.logical_not(x[0])]


@ref("pow")
def _pow(x, a):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return [np.power(x[0], x[1])]


@ref("maximum")
def _maximum(x, a):
    return [np.maximum(x[0], x[1])]


@ref("minimum")
def _minimum(x, a):
    return [np.minimum(x[0], x[1])]


@ref("equal")
def _equal(x, a):
    return [np.equal(x[0], x[1])]


@ref("not_equal")
def _not_equal(x, a):
    return [np.not_equal(x[0], x[1])]


@ref("less")
def _less(x, a):
    return [np.less(x[0], x[1])]


@ref("less_equal")
def _less_equal(x, a):
    return [np.less_equal(x[0], x[1])]


@ref("greater")
def _greater(x, a):
    return [np.greater(x[0], x[1])]


@ref("greater_equal")
def _greater_equal(x, a):
    return [np.greater_equal(x[0], x[1])]


@ref("logical_and")
def _logical_and(x, a):
    return [np.logical_and(x[0], x[1])]


@ref("logical_or")
def _logical_or(x, a):
    return [np.logical_or(x[0], x[1])]


@ref("logical_xor")
def _logical_xor(x, a):
    return [np.logical_xor(x[0], x[1])]


@ref("where")
def _where(x, a):
    return [np.where(x[0], x[1], x[2])]


_INT = {"i32": np.int32, "i64": np.int64, "u8": np.uint8}


@ref("cast")
def _cast(x, a):
    """Spora's cast: float -> integer truncates and saturates; 16-bit float
    targets are reached through float32 (as the kernels do)."""
    v, to = x[0], a["dtype"]
    if to == "bool":
        return [v != 0]
    if to in _INT:
        if v.dtype.kind == "f":
            info = np.iinfo(_INT[to])
            v = np.clip(np.trunc(v), info.min, info.max)
        return [v.astype(_INT[to])]
    if to == "f64":
        return [v.astype(np.float64)]
    v32 = v.astype(np.float32)
    if to == "f32":
        return [v32.astype(np.float64)]
    if to == "f16":
        return [v32.astype(np.float16).astype(np.float64)]
    return [H.bf16_bits_to_f64(H.f32_to_bf16_bits(v32))]
