"""The loss functions of spora.ops with MindSpore's signatures and
PyTorch's semantics: cross_entropy and nll_loss with class weights,
binary_cross_entropy_with_logits. Class weights are composed from core ops
(log_softmax, gather_elements, gather, sums); without them cross_entropy
and nll_loss are the core ops themselves."""
from . import _C
from . import _dtype as D
from ._argcheck import _int, _kind, _tensor
from ._tensor import _call

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"[{op}] reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _class_weight(op, weight, c, like):
    w = _tensor(weight, op, "weight", like)
    if tuple(w.shape) != (c,):
        raise ValueError(f"[{op}] weight must have one entry per class, shape ({c},), got {tuple(w.shape)}")
    return w.astype(like.dtype) if w.dtype != like.dtype else w


def _weighted_nll(op, logp, target, weight, ignore_index, reduction, label_smoothing):
    """nll over log-probabilities (N, C, d1...) with class weights, composed
    from core ops. PyTorch's definition: the loss of sample i is
    -w[t_i] * logp[i, t_i] (0 where t_i == ignore_index); with smoothing eps
    it is (1 - eps) * that + eps / C * sum_c -w[c] * logp[i, c]; the mean
    divides the sum by the sum of w[t_i] over the samples not ignored."""
    c = logp.shape[1]
    w = _class_weight(op, weight, c, logp)
    valid = target != ignore_index
    safe = _call("where", [valid, target, _C.operand(0, target)])
    picked = _call("gather_elements", [logp, safe.expand_dims(1)], axis=1).squeeze(1)
    wt = _call("gather", [w, safe], axis=0) * valid.astype(logp.dtype)
    loss = -(picked * wt)
    if label_smoothing:
        shape = (1, c) + (1,) * (logp.ndim - 2)
        smooth = -(logp * w.reshape(shape)).sum(1) * valid.astype(logp.dtype)
        loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / c)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / wt.sum()


def _nll_common(op, raw_op, x, target, weight, ignore_index, reduction, label_smoothing, logp_of):
    _check_reduction(op, reduction)
    x = _tensor(x, op, "input")
    label_smoothing = float(label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"[{op}] label_smoothing must be in [0, 1], got {label_smoothing}")
    ignore_index = _int(ignore_index, op, "ignore_index")
    target = _tensor(target, op, "target")
    if target.dtype.is_floating_point:
        # Class probabilities, shaped like the input (PyTorch / MindSpore).
        if tuple(target.shape) != tuple(x.shape):
            raise ValueError(f"[{op}] probability targets must have the input's shape {tuple(x.shape)}, got "
                             f"{tuple(target.shape)}")
        axis = 1 if x.ndim > 1 else 0
        c = x.shape[axis]
        t = target.astype(x.dtype)
        if label_smoothing:
            t = t * (1.0 - label_smoothing) + label_smoothing / c
        prod_ = t * logp_of(x, axis)
        if weight is not None:
            shape = [1] * x.ndim
            shape[axis] = c
            prod_ = prod_ * _class_weight(op, weight, c, x).reshape(tuple(shape))
        loss = -prod_.sum(axis)
        return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss
    if target.dtype not in (D.int32, D.int64):
        raise TypeError(f"[{op}] target takes class indices (int32/int64) or probabilities (float), got "
                        f"{_kind(target)}")
    if weight is None:
        return _call(raw_op, [x, target], reduction=reduction, label_smoothing=label_smoothing,
                     ignore_index=ignore_index)
    unbatched = x.ndim == 1
    if unbatched:
        x, target = x.expand_dims(0), target.reshape(1)
    if x.ndim < 2 or tuple(target.shape) != (x.shape[0],) + tuple(x.shape[2:]):
        raise ValueError(f"[{op}] target {tuple(target.shape)} must be the input {tuple(x.shape)} without its "
                         f"class axis (1)")
    loss = _weighted_nll(op, logp_of(x, 1), target, weight, ignore_index, reduction, label_smoothing)
    return loss.reshape(()) if unbatched and reduction == "none" else loss


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of logits (N, C) or (N, C, d1, ...) against class
    indices (the input's shape without C) or class probabilities (the
    input's shape). MindSpore's signature; PyTorch's semantics for weight
    (one per class; the mean divides by the summed weights of the targets),
    ignore_index and label_smoothing."""
    return _nll_common("cross_entropy", "cross_entropy", input, target, weight, ignore_index, reduction,
                       label_smoothing, lambda x, axis: x.log_softmax(axis))


def nll_loss(inputs, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Negative log-likelihood of log-probabilities (N, C) or (N, C, d1, ...)
    at class indices; MindSpore's signature, PyTorch's semantics for weight
    and ignore_index."""
    return _nll_common("nll_loss", "nll_loss", inputs, target, weight, ignore_index, reduction, label_smoothing,
                       lambda x, axis: x)


def binary_cross_entropy_with_logits(logits, label, weight=None, pos_weight=None, reduction="mean"):
    """Binary cross-entropy of sigmoid(logits) against label in [0, 1],
    computed stably from the logits (MindSpore's signature, PyTorch's
    semantics): -w * (pos_weight * y * log(sigmoid(x)) + (1 - y) *
    log(1 - sigmoid(x))). weight broadcasts against the loss; pos_weight
    against the last dim (one per class)."""
    op = "binary_cross_entropy_with_logits"
    _check_reduction(op, reduction)
    x = _tensor(logits, op, "logits")
    if not x.dtype.is_floating_point:
        raise TypeError(f"[{op}] logits must be a float tensor, got {_kind(x)}")
    y = _tensor(label, op, "label", x)
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"[{op}] logits {tuple(x.shape)} and label {tuple(y.shape)} must have the same shape")
    y = y.astype(x.dtype) if y.dtype != x.dtype else y
    # log(1 + exp(-|x|)) + max(-x, 0) = -log(sigmoid(x)), without overflow.
    soft = _call("log1p", [_call("exp", [-_call("abs", [x])])])
    if pos_weight is None:
        loss = _call("relu", [x]) - x * y + soft
    else:
        pw = _tensor(pos_weight, op, "pos_weight", x).astype(x.dtype)
        loss = (1.0 - y) * x + (1.0 + (pw - 1.0) * y) * (soft + _call("relu", [-x]))
    if weight is not None:
        loss = loss * _tensor(weight, op, "weight", x).astype(x.dtype)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss
