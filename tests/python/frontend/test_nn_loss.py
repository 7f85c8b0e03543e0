"""Loss cells vs numpy formulas, and their gradients."""
import numpy as np
import pytest

import spora
from spora import nn
from nn_testutil import check_grads, np_


def log_softmax(x, axis=1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def reduce(v, how):
    return v.mean() if how == "mean" else v.sum() if how == "sum" else v


def rnd(*s, seed=0):
    return np.random.default_rng(seed).standard_normal(s)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_class_indices(reduction, smoothing):
    x = rnd(6, 5)
    y = np.array([0, 4, 2, 2, 1, 3], np.int32)
    lp = log_softmax(x)
    per = (1 - smoothing) * -lp[np.arange(6), y] + smoothing * -lp.mean(axis=1)
    got = nn.CrossEntropyLoss(reduction=reduction, label_smoothing=smoothing)(spora.Tensor(x), spora.Tensor(y))
    np.testing.assert_allclose(np_(got), reduce(per, reduction), rtol=1e-10)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_one_hot_and_probabilities(smoothing):
    x = rnd(4, 3, seed=1)
    y = np.array([2, 0, 1, 1])
    onehot = np.eye(3)[y]
    loss = nn.CrossEntropyLoss(label_smoothing=smoothing)
    by_index = np_(loss(spora.Tensor(x), spora.Tensor(y.astype(np.int64))))
    by_onehot = np_(loss(spora.Tensor(x), spora.Tensor(onehot)))
    np.testing.assert_allclose(by_onehot, by_index, rtol=1e-10)
    probs = np.abs(rnd(4, 3, seed=2))
    probs /= probs.sum(1, keepdims=True)
    t = probs * (1 - smoothing) + smoothing / 3
    want = -(t * log_softmax(x)).sum(1).mean()
    np.testing.assert_allclose(np_(loss(spora.Tensor(x), spora.Tensor(probs))), want, rtol=1e-10)


def test_cross_entropy_ignore_index_and_spatial():
    x = rnd(2, 4, 3, seed=3)          # (N, C, d)
    y = np.array([[0, 3, -100], [1, 1, 2]], np.int64)
    lp = log_softmax(x, axis=1)
    keep = y != -100
    vals = [-lp[n, y[n, d], d] for n in range(2) for d in range(3) if keep[n, d]]
    got = np_(nn.CrossEntropyLoss()(spora.Tensor(x), spora.Tensor(y)))
    np.testing.assert_allclose(got, np.mean(vals), rtol=1e-10)


def test_nll_loss():
    lp = log_softmax(rnd(5, 4, seed=4))
    y = np.array([3, 0, 1, 2, 0], np.int32)
    got = np_(nn.NLLLoss(reduction="sum")(spora.Tensor(lp), spora.Tensor(y)))
    np.testing.assert_allclose(got, -lp[np.arange(5), y].sum(), rtol=1e-10)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1(reduction):
    a, b = rnd(3, 4, seed=5), rnd(3, 4, seed=6)
    np.testing.assert_allclose(np_(nn.MSELoss(reduction)(spora.Tensor(a), spora.Tensor(b))),
                               reduce((a - b) ** 2, reduction), rtol=1e-12)
    np.testing.assert_allclose(np_(nn.L1Loss(reduction)(spora.Tensor(a), spora.Tensor(b))),
                               reduce(np.abs(a - b), reduction), rtol=1e-12)


def test_bce_with_logits_plain_weighted_and_pos_weight():
    x = rnd(4, 3, seed=7) * 30  # large logits: the stable form must not overflow
    y = (rnd(4, 3, seed=8) > 0).astype(np.float64)
    sig = 1 / (1 + np.exp(-x))
    with np.errstate(divide="ignore", invalid="ignore"):
        naive = -(y * np.log(sig) + (1 - y) * np.log1p(-sig))
    stable = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    finite = np.isfinite(naive)
    np.testing.assert_allclose(stable[finite], naive[finite], rtol=1e-6, atol=1e-9)
    got = np_(nn.BCEWithLogitsLoss()(spora.Tensor(x), spora.Tensor(y)))
    np.testing.assert_allclose(got, stable.mean(), rtol=1e-10)
    w = np.array([1.0, 2.0, 0.5])
    pw = np.array([3.0, 1.0, 0.25])
    x2 = rnd(4, 3, seed=9)
    sp = np.log1p(np.exp(-np.abs(x2)))
    want = (1 - y) * x2 + (1 + (pw - 1) * y) * (sp + np.maximum(-x2, 0))
    got = nn.BCEWithLogitsLoss(reduction="sum", weight=w, pos_weight=pw)(spora.Tensor(x2), spora.Tensor(y))
    np.testing.assert_allclose(np_(got), (want * w).sum(), rtol=1e-10)


def test_loss_gradients_vs_finite_differences():
    y_idx = spora.Tensor(np.array([1, 0, 2], np.int32))
    y_f = spora.Tensor(rnd(3, 3, seed=10))

    class With(nn.Cell):
        def __init__(self, loss, y):
            super().__init__()
            self.loss, self.y = loss, y

        def construct(self, x):
            return self.loss(x, self.y)
    x = spora.Tensor(rnd(3, 3, seed=11))
    for loss, y in ((nn.CrossEntropyLoss(label_smoothing=0.1), y_idx), (nn.MSELoss(), y_f), (nn.L1Loss(), y_f),
                    (nn.BCEWithLogitsLoss(), spora.Tensor((rnd(3, 3, seed=12) > 0).astype(np.float64)))):
        check_grads(With(loss, y), [x], params=False)


def test_loss_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match=r"\[MSELoss\] logits \(2, 3\) and labels \(3, 2\).*test_nn_loss.py:\d+"):
        nn.MSELoss()(spora.Tensor(np.zeros((2, 3))), spora.Tensor(np.zeros((3, 2))))
    with pytest.raises(ValueError, match="reduction"):
        nn.L1Loss("avg")
