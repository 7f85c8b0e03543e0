"""Loss cells. reduction: 'mean' (default), 'sum' or 'none'."""
from .. import Tensor, ops
from ..ops import raw
from . import _util
from .cell import Cell

_REDUCTIONS = ("mean", "sum", "none")


def _as_tensor(x, like=None):
    if isinstance(x, Tensor):
        return x
    return Tensor(x) if like is None else Tensor(x, dtype=like.dtype)


class LossBase(Cell):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"[{type(self).__name__}] reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def _reduce(self, x):
        if self.reduction == "mean":
            return raw.mean(x)
        if self.reduction == "sum":
            return raw.sum(x)
        return x

    def _same_shape(self, logits, labels):
        if tuple(logits.shape) != tuple(labels.shape):
            raise ValueError(f"[{type(self).__name__}] logits {tuple(logits.shape)} and labels "
                             f"{tuple(labels.shape)} must have the same shape{_util._C_location()}")

    def extend_repr(self):
        return f"reduction={self.reduction}"


class CrossEntropyLoss(LossBase):
    """Softmax cross-entropy from logits (N, C) or (N, C, d1, ...)
    (MindSpore's signature; ops.cross_entropy does the work).

    labels: class indices (int32/int64, logits' shape without C) or class
    probabilities / one-hot (float, logits' shape). weight: one per class
    (C,); with index labels the mean divides by the summed weights of the
    labels, as in PyTorch. label_smoothing eps mixes the target with the
    uniform distribution: (1 - eps) * target + eps / C. ignore_index (index
    labels only): those samples count neither in the sum nor in the mean's
    denominator.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"[CrossEntropyLoss] label_smoothing must be in [0, 1], got {label_smoothing}")
        if isinstance(weight, (int, float)) and not isinstance(weight, bool):
            raise TypeError(f"[CrossEntropyLoss] weight takes a tensor of one weight per class, got {weight!r}; "
                            f"MindSpore's order is CrossEntropyLoss(weight, ignore_index, reduction, "
                            f"label_smoothing)")
        self.weight = None if weight is None else _as_tensor(weight)
        self.ignore_index = int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def construct(self, logits, labels):
        labels = _as_tensor(labels)
        if labels.dtype.name in ("int32", "int64"):
            return ops.cross_entropy(logits, labels, self.weight, self.ignore_index, self.reduction,
                                     self.label_smoothing)
        self._same_shape(logits, labels)
        if len(logits.shape) < 1:
            raise ValueError(f"[CrossEntropyLoss] logits must be (N, C, ...), got a scalar{_util._C_location()}")
        return ops.cross_entropy(logits, labels, self.weight, self.ignore_index, self.reduction,
                                 self.label_smoothing)

    def extend_repr(self):
        return f"reduction={self.reduction}, label_smoothing={self.label_smoothing}"


class NLLLoss(LossBase):
    """Negative log-likelihood of log-probabilities (N, C, ...) at class-index
    labels (MindSpore's signature). weight: one per class (C,); the mean
    divides by the summed weights of the labels not ignored."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        if isinstance(weight, (int, float)) and not isinstance(weight, bool):
            raise TypeError(f"[NLLLoss] weight takes a tensor of one weight per class, got {weight!r}; "
                            f"MindSpore's order is NLLLoss(weight, ignore_index, reduction)")
        self.weight = None if weight is None else _as_tensor(weight)
        self.ignore_index = int(ignore_index)

    def construct(self, log_probs, labels):
        labels = _as_tensor(labels)
        return ops.nll_loss(log_probs, labels, self.weight, self.ignore_index, self.reduction)


class MSELoss(LossBase):
    """(logits - labels)^2, reduced."""

    def construct(self, logits, labels):
        labels = _as_tensor(labels, logits)
        self._same_shape(logits, labels)
        return self._reduce(raw.square(logits - labels))


class L1Loss(LossBase):
    """|logits - labels|, reduced."""

    def construct(self, logits, labels):
        labels = _as_tensor(labels, logits)
        self._same_shape(logits, labels)
        return self._reduce(raw.abs(logits - labels))


class BCEWithLogitsLoss(LossBase):
    """Binary cross-entropy of sigmoid(logits) against labels in [0, 1],
    computed stably from the logits: max(x, 0) - x*y + log(1 + exp(-|x|)).

    weight rescales each element (broadcast); pos_weight (per class, the last
    dim) weighs the positive term, as in PyTorch.
    """

    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        self.weight = None if weight is None else _as_tensor(weight)
        self.pos_weight = None if pos_weight is None else _as_tensor(pos_weight)

    def construct(self, logits, labels):
        labels = _as_tensor(labels, logits).astype(logits.dtype)
        self._same_shape(logits, labels)
        x, y = logits, labels
        soft = raw.log1p(raw.exp(-raw.abs(x)))
        if self.pos_weight is None:
            loss = raw.relu(x) - x * y + soft
        else:
            pw = self.pos_weight.astype(x.dtype)
            loss = (1.0 - y) * x + (1.0 + (pw - 1.0) * y) * (soft + raw.relu(-x))
        if self.weight is not None:
            loss = loss * self.weight.astype(x.dtype)
        return self._reduce(loss)


class SoftmaxCrossEntropyWithLogits(LossBase):
    """MindSpore's softmax cross-entropy: logits (N, C); with sparse=False
    labels are (N, C) probabilities or one-hot rows (of logits' dtype), with
    sparse=True class indices (N,) int32/int64. reduction defaults to
    'none' here, as in MindSpore: the loss of each sample, shape (N,)."""

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        self.sparse = bool(sparse)

    def construct(self, logits, labels):
        if len(logits.shape) != 2:
            raise ValueError(f"[SoftmaxCrossEntropyWithLogits] logits must be (N, C), got shape "
                             f"{tuple(logits.shape)}{_util._C_location()}")
        labels = _as_tensor(labels)
        if self.sparse:
            if labels.dtype.name not in ("int32", "int64"):
                raise TypeError(f"[SoftmaxCrossEntropyWithLogits] sparse=True takes class indices (int32 or "
                                f"int64), got {labels.dtype.name} labels; give one-hot rows with sparse=False"
                                f"{_util._C_location()}")
            return raw.cross_entropy(logits, labels, reduction=self.reduction)
        self._same_shape(logits, labels)
        per_sample = -raw.sum(labels.astype(logits.dtype) * raw.log_softmax(logits, axis=1), axes=[1])
        return self._reduce(per_sample)

    def extend_repr(self):
        return f"sparse={self.sparse}, reduction={self.reduction}"


class WithLossCell(Cell):
    """net + loss_fn as one cell: construct(data, label) -> loss (what Model trains)."""

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        return self._backbone
