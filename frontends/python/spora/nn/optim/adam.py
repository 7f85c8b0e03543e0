"""Adam and AdamW, one adam_update op per group."""
from .. import _util
from .optimizer import Optimizer


class Adam(Optimizer):
    """PyTorch's Adam (L2 weight decay added to the gradient):

        m = beta1 * m + (1 - beta1) * g ;  v = beta2 * v + (1 - beta2) * g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps)

    amsgrad keeps the running maximum of v. State: "adam_m.<param>",
    "adam_v.<param>" (and "adam_vmax.<param>"), f32 for f16/bf16 params.
    """

    _decoupled = False

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                 amsgrad=False, clip_norm=None):
        name = type(self).__name__
        for what, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"[{name}] {what} must be in [0, 1), got {b}")
        if eps < 0:
            raise ValueError(f"[{name}] eps must be >= 0, got {eps}")
        self._state_names = ("adam_m", "adam_v", "adam_vmax") if amsgrad else ("adam_m", "adam_v")
        self._chunk = 12 if amsgrad else 15
        super().__init__(params, learning_rate, weight_decay, clip_norm)
        self.beta1, self.beta2, self.eps, self.amsgrad = float(beta1), float(beta2), float(eps), bool(amsgrad)

    def _update(self, group, lr, step, grad_scale, params, grads, states):
        attrs = dict(beta1=self.beta1, beta2=self.beta2, eps=self.eps, weight_decay=group.weight_decay,
                     decoupled=self._decoupled, amsgrad=self.amsgrad)
        if self._spmd_shard_axis is not None:
            attrs["shard_axis"] = self._spmd_shard_axis
        tensors = list(params) + list(grads)
        for name in self._state_names:
            tensors += states[name]
        nout = len(params) * (1 + len(self._state_names))
        outs = _util.call_op("adam_update", [lr, step, grad_scale, *tensors], nout, **attrs)
        self._write(params, states, outs)


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the
    Adam step); PyTorch's default weight_decay 0.01."""

    _decoupled = True

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
                 amsgrad=False, clip_norm=None):
        super().__init__(params, learning_rate, beta1, beta2, eps, weight_decay, amsgrad, clip_norm)
