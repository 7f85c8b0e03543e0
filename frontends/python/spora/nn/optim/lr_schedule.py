"""Learning-rate schedules: callables of the global step.

A schedule called with a Python number returns a float; called with a scalar
Tensor (the optimizer's global_step) it returns a scalar Tensor built from
ops, so the same schedule runs inside a compiled training step without
recompiling when the step advances (MindSpore's LearningRateSchedule idea).

Units: by default one unit is one optimizer step. With steps_per_epoch=k the
unit is an epoch: the value changes only at epoch boundaries (a per-epoch
schedule, PyTorch's StepLR/CosineAnnealingLR used once per epoch).
"""
import math

import numpy as np

from ... import ops
from .._util import is_tensor


class _Scalar:
    """Float arithmetic helpers with the same names as the tensor ones."""
    floor = staticmethod(math.floor)
    cos = staticmethod(math.cos)
    exp = staticmethod(math.exp)

    @staticmethod
    def minimum(a, b):
        return min(a, b)

    @staticmethod
    def maximum(a, b):
        return max(a, b)


class _Tensor:
    floor = staticmethod(lambda x: ops.floor(x))
    cos = staticmethod(lambda x: ops.cos(x))
    exp = staticmethod(lambda x: ops.exp(x))
    minimum = staticmethod(lambda a, b: ops.minimum(a, b))
    maximum = staticmethod(lambda a, b: ops.maximum(a, b))


class LearningRateSchedule:
    """Base class: subclasses implement _value(unit, m) with m the math helpers."""

    def __init__(self, steps_per_epoch=1):
        if int(steps_per_epoch) <= 0:
            raise ValueError(f"[lr_schedule] steps_per_epoch must be positive, got {steps_per_epoch}")
        self.steps_per_epoch = int(steps_per_epoch)

    def __call__(self, step):
        m = _Tensor if is_tensor(step) else _Scalar
        unit = step if self.steps_per_epoch == 1 else m.floor(step / self.steps_per_epoch)
        return self._value(unit, m)

    def _value(self, unit, m):
        raise NotImplementedError

    def values(self, num_steps):
        """The first num_steps learning rates as a list of floats."""
        return [float(self(i)) for i in range(int(num_steps))]


class ConstantLR(LearningRateSchedule):
    """Always learning_rate (what a plain float learning rate becomes)."""

    def __init__(self, learning_rate):
        super().__init__()
        self.learning_rate = float(learning_rate)

    def _value(self, unit, m):
        return unit * 0.0 + self.learning_rate


class StepLR(LearningRateSchedule):
    """learning_rate * gamma ** floor(unit / step_size)."""

    def __init__(self, learning_rate, step_size, gamma=0.1, steps_per_epoch=1):
        super().__init__(steps_per_epoch)
        if int(step_size) <= 0:
            raise ValueError(f"[lr_schedule] StepLR step_size must be positive, got {step_size}")
        if gamma <= 0:
            raise ValueError(f"[lr_schedule] StepLR gamma must be positive, got {gamma}")
        self.learning_rate, self.step_size, self.gamma = float(learning_rate), int(step_size), float(gamma)

    def _value(self, unit, m):
        k = m.floor(unit / self.step_size)
        return self.learning_rate * m.exp(k * math.log(self.gamma))


class CosineDecayLR(LearningRateSchedule):
    """Cosine from max_lr down to min_lr over decay_steps units, then min_lr."""

    def __init__(self, min_lr, max_lr, decay_steps, steps_per_epoch=1):
        super().__init__(steps_per_epoch)
        if int(decay_steps) <= 0:
            raise ValueError(f"[lr_schedule] CosineDecayLR decay_steps must be positive, got {decay_steps}")
        self.min_lr, self.max_lr, self.decay_steps = float(min_lr), float(max_lr), int(decay_steps)

    def _value(self, unit, m):
        p = m.minimum(unit, self.decay_steps) / self.decay_steps
        return self.min_lr + 0.5 * (self.max_lr - self.min_lr) * (1.0 + m.cos(p * math.pi))


class WarmupLR(LearningRateSchedule):
    """Linear warm-up over warmup_steps units, then `after`.

    The factor is (unit + 1) / warmup_steps (so the first step already moves),
    capped at 1; `after` is a float or a schedule, started at 0 when the
    warm-up ends.
    """

    def __init__(self, after, warmup_steps, steps_per_epoch=1):
        super().__init__(steps_per_epoch)
        if int(warmup_steps) <= 0:
            raise ValueError(f"[lr_schedule] WarmupLR warmup_steps must be positive, got {warmup_steps}")
        self.after = after if isinstance(after, LearningRateSchedule) else ConstantLR(after)
        if self.after.steps_per_epoch != 1 and self.steps_per_epoch != 1:
            raise ValueError("[lr_schedule] WarmupLR: give steps_per_epoch to the warm-up or "
                             "to the inner schedule, not both")
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        m = _Tensor if is_tensor(step) else _Scalar
        spe = self.steps_per_epoch
        unit = step if spe == 1 else m.floor(step / spe)
        factor = m.minimum((unit + 1.0) / self.warmup_steps, 1.0)
        rest = m.maximum(step - self.warmup_steps * spe, 0.0)
        return factor * self.after(rest)


class ListLR(LearningRateSchedule):
    """MindSpore's dynamic learning rate: one rate per step from a list (or a
    1-d array or Tensor), as nn.cosine_decay_lr and the other dynamic_lr
    functions return; an optimizer given such a list as learning_rate makes
    it this schedule. Past the list's end the last rate stays."""

    def __init__(self, rates):
        super().__init__()
        values = np.asarray(rates.asnumpy() if is_tensor(rates) else rates, dtype=np.float64)
        if values.ndim != 1 or values.size == 0:
            raise ValueError(f"[optimizer] a learning_rate list must be 1-d and non-empty, got shape {values.shape}")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("[optimizer] a learning_rate list must hold non-negative finite numbers")
        self.rates = values

    def __call__(self, step):
        last = self.rates.size - 1
        if not is_tensor(step):
            return float(self.rates[min(int(step), last)])
        # In a compiled step the index is the global_step tensor: gather the rate.
        from ... import Tensor, int32
        index = ops.minimum(step, float(last)).astype(int32).reshape(1)
        return ops.gather(Tensor(self.rates.astype(np.float32)), index, 0).reshape(())


def as_schedule(learning_rate):
    """A float, a list of per-step rates, or a schedule (or any callable of
    the step) as a schedule."""
    if isinstance(learning_rate, LearningRateSchedule):
        return learning_rate
    if callable(learning_rate):
        return _Callable(learning_rate)
    if isinstance(learning_rate, (list, tuple, np.ndarray)) or is_tensor(learning_rate):
        if np.ndim(learning_rate.asnumpy() if is_tensor(learning_rate) else learning_rate) == 1:
            return ListLR(learning_rate)
    lr = float(learning_rate)
    if not math.isfinite(lr) or lr < 0:
        raise ValueError(f"[optimizer] learning_rate must be a non-negative number, got {learning_rate}")
    return ConstantLR(lr)


class _Callable(LearningRateSchedule):
    """A user function of the step; it must accept scalar Tensors to run in graph mode."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __call__(self, step):
        return self.fn(step)
