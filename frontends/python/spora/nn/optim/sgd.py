"""SGD (with momentum, dampening, Nesterov, weight decay) and Momentum."""
from .. import _util
from .optimizer import Optimizer


class SGD(Optimizer):
    """PyTorch's torch.optim.SGD (MindSpore's SGD), one sgd_update op per group:

        g = grad + weight_decay * p
        b = momentum * b + (1 - dampening) * g   (b = g on the first step)
        p = p - lr * (g + momentum * b if nesterov else b)

    Without momentum: p = p - lr * g. State: one buffer "moments.<param>" per
    parameter when momentum > 0.
    """

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, clip_norm=None):
        momentum, dampening = float(momentum), float(dampening)
        if momentum < 0:
            raise ValueError(f"[{type(self).__name__}] momentum must be >= 0, got {momentum}")
        if not 0.0 <= dampening <= 1.0:
            raise ValueError(f"[{type(self).__name__}] dampening must be in [0, 1], got {dampening}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"[{type(self).__name__}] nesterov needs momentum > 0 and dampening 0")
        self._state_names = ("moments",) if momentum > 0 else ()
        self._chunk = 20 if momentum > 0 else 31
        super().__init__(params, learning_rate, weight_decay, clip_norm)
        self.momentum, self.dampening, self.nesterov = momentum, dampening, bool(nesterov)

    def _update(self, group, lr, step, grad_scale, params, grads, states):
        attrs = dict(momentum=self.momentum, dampening=self.dampening, weight_decay=group.weight_decay,
                     nesterov=self.nesterov)
        if self._spmd_shard_axis is not None:
            attrs["shard_axis"] = self._spmd_shard_axis
        bufs = list(states.get("moments", []))
        if self.momentum > 0 and self.dampening > 0:
            # The op computes b = m*b + (1-d)*g; PyTorch starts with b = g. The
            # buffers are 0 before the first step, so feeding b0 = d*g/m there
            # gives b = g; later steps add 0. Data, not a different graph.
            first = (step <= 1.0).astype(grads[0].dtype)
            coef = first * (self.dampening / self.momentum)
            bufs = [b + coef * (grad_scale * g + group.weight_decay * p).astype(b.dtype)
                    for b, g, p in zip(bufs, grads, params)]
        nout = len(params) * (1 + len(self._state_names))
        outs = _util.call_op("sgd_update", [lr, grad_scale, *params, *grads, *bufs], nout, **attrs)
        self._write(params, states, outs if nout > 1 else (outs,))


class Momentum(SGD):
    """MindSpore's Momentum: SGD with momentum (no dampening).

    Momentum(params, learning_rate, momentum, weight_decay=0.0, use_nesterov=False).
    """

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, use_nesterov=False, clip_norm=None):
        if momentum <= 0:
            raise ValueError(f"[Momentum] momentum must be > 0, got {momentum}")
        super().__init__(params, learning_rate, momentum=momentum, weight_decay=weight_decay,
                         nesterov=use_nesterov, clip_norm=clip_norm)
