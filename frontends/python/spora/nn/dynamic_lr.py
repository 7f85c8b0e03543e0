"""MindSpore's dynamic learning-rate functions (nn.cosine_decay_lr, ...):
each returns a list with one rate per step, which an optimizer takes as its
learning_rate (spora.nn.optim.lr_schedule.ListLR). The current epoch of
step i is floor(i / step_per_epoch)."""
import math


def _check(total_step, step_per_epoch, decay_epoch, where):
    for name, v in (("total_step", total_step), ("step_per_epoch", step_per_epoch), ("decay_epoch", decay_epoch)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"[{where}] {name} must be an int, got {type(v).__name__}")
        if v <= 0:
            raise ValueError(f"[{where}] {name} must be positive, got {v}")


def _epochs(total_step, step_per_epoch):
    return [i // step_per_epoch for i in range(total_step)]


def piecewise_constant_lr(milestone, learning_rates):
    """learning_rates[j] for the steps from milestone[j-1] (0 for j = 0) up
    to milestone[j]; milestone is increasing and its last entry is the step
    count."""
    if len(milestone) != len(learning_rates) or not milestone:
        raise ValueError(f"[piecewise_constant_lr] milestone and learning_rates must have the same non-zero "
                         f"length, got {len(milestone)} and {len(learning_rates)}")
    out, start = [], 0
    for m, lr in zip(milestone, learning_rates):
        if isinstance(m, bool) or not isinstance(m, int) or m <= start:
            raise ValueError(f"[piecewise_constant_lr] milestone must be increasing positive ints, got {milestone}")
        out += [float(lr)] * (m - start)
        start = m
    return out


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    """learning_rate * decay_rate ** (epoch / decay_epoch) (the exponent
    floored when is_stair)."""
    _check(total_step, step_per_epoch, decay_epoch, "exponential_decay_lr")
    return [learning_rate * decay_rate ** (e // decay_epoch if is_stair else e / decay_epoch)
            for e in _epochs(total_step, step_per_epoch)]


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    """learning_rate * exp(-decay_rate * epoch / decay_epoch) (the ratio
    floored when is_stair)."""
    _check(total_step, step_per_epoch, decay_epoch, "natural_exp_decay_lr")
    return [learning_rate * math.exp(-decay_rate * (e // decay_epoch if is_stair else e / decay_epoch))
            for e in _epochs(total_step, step_per_epoch)]


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    """learning_rate / (1 + decay_rate * epoch / decay_epoch) (the ratio
    floored when is_stair)."""
    _check(total_step, step_per_epoch, decay_epoch, "inverse_decay_lr")
    return [learning_rate / (1 + decay_rate * (e // decay_epoch if is_stair else e / decay_epoch))
            for e in _epochs(total_step, step_per_epoch)]


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    """min_lr + (max_lr - min_lr) * (1 + cos(pi * epoch / decay_epoch)) / 2,
    the epoch capped at decay_epoch (min_lr from then on)."""
    _check(total_step, step_per_epoch, decay_epoch, "cosine_decay_lr")
    if not 0 <= min_lr < max_lr:
        raise ValueError(f"[cosine_decay_lr] needs 0 <= min_lr < max_lr, got {min_lr} and {max_lr}")
    return [min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * min(e, decay_epoch) / decay_epoch))
            for e in _epochs(total_step, step_per_epoch)]


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch, power,
                        update_decay_epoch=False):
    """(learning_rate - end_learning_rate) * (1 - epoch / decay_epoch) ** power
    + end_learning_rate, the epoch capped at decay_epoch; with
    update_decay_epoch the decay period instead grows to the next multiple
    of decay_epoch at or above the epoch."""
    _check(total_step, step_per_epoch, decay_epoch, "polynomial_decay_lr")
    out = []
    for e in _epochs(total_step, step_per_epoch):
        period = decay_epoch
        if update_decay_epoch:
            period = decay_epoch * max(1, math.ceil(e / decay_epoch))
        else:
            e = min(e, decay_epoch)
        out.append((learning_rate - end_learning_rate) * (1 - e / period) ** power + end_learning_rate)
    return out


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """learning_rate * min(epoch, warmup_epoch) / warmup_epoch: 0 in the
    first epoch, rising linearly to learning_rate."""
    _check(total_step, step_per_epoch, warmup_epoch, "warmup_lr")
    return [learning_rate * min(e, warmup_epoch) / warmup_epoch for e in _epochs(total_step, step_per_epoch)]
