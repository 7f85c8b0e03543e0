"""Metrics for Model.eval (MindSpore's Metric protocol: clear, update, eval).

Updates take the network output and the label as Tensors or numpy arrays;
the arithmetic is numpy on the host, since a metric is a running sum read once
per evaluation, not something worth compiling.
"""
import numpy as np


def _np(x):
    return x.asnumpy() if hasattr(x, "asnumpy") else np.asarray(x)


class Metric:
    """Base class. Subclasses keep running sums; eval() raises if nothing was seen."""

    def __init__(self):
        self.clear()

    def clear(self):
        raise NotImplementedError

    def update(self, *inputs):
        raise NotImplementedError

    def eval(self):
        raise NotImplementedError


class Accuracy(Metric):
    """Fraction of samples whose arg-max over the last axis equals the label.

    update(logits, labels): logits (N, C); labels class indices (N,) or one-hot
    (N, C). For a single-logit binary output (N,) or (N, 1) a logit > 0
    counts as class 1.
    """

    def clear(self):
        self._correct = 0
        self._total = 0

    def update(self, *inputs):
        if len(inputs) != 2:
            raise ValueError(f"[Accuracy] update takes (logits, labels), got {len(inputs)} inputs")
        y_pred, y = _np(inputs[0]), _np(inputs[1])
        if y_pred.ndim == 2 and y_pred.shape[1] > 1:
            pred = y_pred.argmax(axis=1)
        else:
            pred = (y_pred.reshape(-1) > 0).astype(np.int64)
        if y.ndim == 2 and y_pred.ndim == 2 and y.shape == y_pred.shape and y.shape[1] > 1:
            y = y.argmax(axis=1)
        y = y.reshape(-1)
        if y.shape[0] != pred.shape[0]:
            raise ValueError(f"[Accuracy] {pred.shape[0]} predictions but {y.shape[0]} labels")
        self._correct += int((pred == y).sum())
        self._total += int(y.shape[0])

    def eval(self):
        if self._total == 0:
            raise RuntimeError("[Accuracy] eval() before any update()")
        return self._correct / self._total


class Loss(Metric):
    """Mean of the loss values seen, each weighted by its batch size."""

    def clear(self):
        self._sum = 0.0
        self._count = 0

    def update(self, *inputs):
        if not inputs:
            raise ValueError("[Loss] update takes (loss,) or (loss, batch_size)")
        loss = _np(inputs[0])
        if loss.size != 1:
            raise ValueError(f"[Loss] expects a scalar loss, got shape {loss.shape}")
        n = int(inputs[1]) if len(inputs) > 1 else 1
        self._sum += float(loss.reshape(())) * n
        self._count += n

    def eval(self):
        if self._count == 0:
            raise RuntimeError("[Loss] eval() before any update()")
        return self._sum / self._count


_BY_NAME = {"accuracy": Accuracy, "acc": Accuracy, "loss": Loss}


def get_metrics(metrics):
    """Normalise Model's metrics argument to a {name: Metric} dict."""
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        items = metrics.items()
    elif isinstance(metrics, (set, list, tuple)):
        items = []
        for m in metrics:
            if isinstance(m, str):
                items.append((m, m))
            else:
                items.append((type(m).__name__.lower(), m))
    else:
        raise TypeError(f"[Model] metrics must be a dict, set or list, got {type(metrics).__name__}")
    out = {}
    for name, m in items:
        if isinstance(m, str):
            if m.lower() not in _BY_NAME:
                raise ValueError(f"[Model] unknown metric {m!r}; known: {sorted(_BY_NAME)}")
            m = _BY_NAME[m.lower()]()
        if not isinstance(m, Metric):
            raise TypeError(f"[Model] metric {name!r} is not a Metric")
        out[name] = m
    return out
