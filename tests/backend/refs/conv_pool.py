"""Reference for conv2d_act_pool = max_pool2d(conv2d_act(x, w, b)) [, the
activation with keep_activation], built from the references of the two ops
(the pool_* attributes are max_pool2d's, unprefixed)."""
from . import REFS, ref

_POOL = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")


@ref("conv2d_act_pool")
def _conv2d_act_pool(x, a):
    conv = {k: v for k, v in a.items() if not k.startswith("pool_") and k != "keep_activation"}
    pool = {k: a["pool_" + k] for k in _POOL if "pool_" + k in a}
    act = REFS["conv2d_act"](x, conv)[0]
    y = REFS["max_pool2d"]([act], pool)[0]
    return [y, act] if a.get("keep_activation") else [y]
