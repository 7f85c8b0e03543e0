"""Reference for conv2d_act_pool = max_pool2d(conv2d_act(x, w, b)) [, the
activation with keep_activation], built from the references of the two ops
(the pool_* attributes are max_pool2d's, unprefixed)."""
import numpy as np

from . import REFS, ref

_POOL = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")


@ref("conv2d_act_pool")
def _conv2d_act_pool(x, a):
    conv = {k: v for k, v in a.items() if not k.startswith("pool_") and k != "keep_activation"}
    pool = {k: a["pool_" + k] for k in _POOL if "pool_" + k in a}
    act = REFS["conv2d_act"](x, conv)[0]
    y = REFS["max_pool2d"]([act], pool)[0]
    return [y, act] if a.get("keep_activation") else [y]


@ref("conv2d_act_pool_grad")
def _conv2d_act_pool_grad(x, a):
    """dw, db[, dx] from g = relu'(a) * max_pool2d_grad(a, dy) (activation
    "relu"; "none": g is the pooling's gradient)."""
    xv, w, act, dy = x
    conv = {k: v for k, v in a.items() if k in ("stride", "padding", "pad_mode", "dilation", "groups")}
    pool = {k: a["pool_" + k] for k in _POOL if "pool_" + k in a}
    g = REFS["max_pool2d_grad"]([act, dy], pool)[0]
    if a.get("activation", "relu") == "relu":
        g = np.where(act > 0, g, 0.0)
    out = [REFS["conv2d_grad_weight"]([xv, g], dict(conv, weight_shape=list(w.shape)))[0], g.sum(axis=(0, 2, 3))]
    if a.get("input_grad", True):
        out.append(REFS["conv2d_grad_input"]([g, w], dict(conv, input_shape=list(xv.shape)))[0])
    return out
