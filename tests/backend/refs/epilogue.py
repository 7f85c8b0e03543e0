"""References for the epilogue-fused ops: linear_act, linear_add_act,
conv2d_act, conv2d_add_act = act(base(x, w, b) [+ residual]), built from the
references of linear, conv2d_bias and the activations."""
import numpy as np

from . import REFS, ref


def _act(v, name):
    if name == "none":
        return v
    if name == "relu":
        return np.where(np.isnan(v), v, np.maximum(v, 0))
    if name in ("gelu", "gelu_tanh"):
        return REFS["gelu"]([v], {"approximate": "tanh" if name == "gelu_tanh" else "none"})[0]
    if name == "sigmoid":
        with np.errstate(over="ignore"):
            return 1 / (1 + np.exp(-v))
    if name == "tanh":
        return np.tanh(v)
    raise ValueError(f"unknown activation {name}")


def _fused(base):
    def fn(x, a):
        attrs = {k: v for k, v in a.items() if k != "activation"}
        y = REFS[base](x[:3], attrs)[0]
        if len(x) == 4:
            y = y + x[3]
        return [_act(y, a.get("activation", "none"))]

    return fn


ref("linear_act", "linear_add_act")(_fused("linear"))
ref("conv2d_act", "conv2d_add_act")(_fused("conv2d_bias"))
