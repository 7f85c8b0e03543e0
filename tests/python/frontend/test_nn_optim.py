"""Optimizers vs numpy loops; LR schedules; clipping; graph mode == PyNative."""
import math

import numpy as np
import pytest

import spora
from spora import nn
from nn_testutil import np_

SHAPES = [(3, 4), (5,), (2, 2, 2)]
STEPS = 5


@pytest.fixture(autouse=True)
def _pynative():
    spora.set_context(mode=spora.PYNATIVE_MODE)
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE)


def make(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    params = [spora.Parameter(spora.Tensor(a), name=f"p{i}") for i, a in enumerate(init)]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    return init, params, grads


def run(opt, params, grads, graph=False):
    step = spora.jit(lambda gs: opt(gs)) if graph else opt
    for gs in grads:
        step([spora.Tensor(g) for g in gs])
    return [np_(p) for p in params]


def sgd_ref(init, grads, lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, lrs=None):
    ps = [a.copy() for a in init]
    bufs = [None] * len(ps)
    for t, gs in enumerate(grads):
        rate = lrs[t] if lrs is not None else lr
        for i, g in enumerate(gs):
            g = g + wd * ps[i]
            if momentum:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            ps[i] = ps[i] - rate * g
    return ps


def adam_ref(init, grads, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False, amsgrad=False, scale=None):
    ps = [a.copy() for a in init]
    m = [np.zeros_like(a) for a in ps]
    v = [np.zeros_like(a) for a in ps]
    vmax = [np.zeros_like(a) for a in ps]
    for t, gs in enumerate(grads, start=1):
        s = scale[t - 1] if scale is not None else 1.0
        for i, g in enumerate(gs):
            g = g * s
            if decoupled:
                ps[i] = ps[i] * (1 - lr * wd)
            else:
                g = g + wd * ps[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            vmax[i] = np.maximum(vmax[i], v[i])
            vv = vmax[i] if amsgrad else v[i]
            ps[i] = ps[i] - (lr / (1 - b1 ** t)) * m[i] / (np.sqrt(vv) / math.sqrt(1 - b2 ** t) + eps)
    return ps


SGD_CASES = [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True), dict(momentum=0.8, dampening=0.3),
             dict(momentum=0.9, weight_decay=0.01), dict(weight_decay=0.1)]


@pytest.mark.parametrize("kw", SGD_CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "plain")
@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "jit"])
def test_sgd_matches_numpy(kw, graph):
    init, params, grads = make()
    opt = nn.SGD(params, learning_rate=0.05, **kw)
    got = run(opt, params, grads, graph)
    want = sgd_ref(init, grads, 0.05, kw.get("momentum", 0.0), kw.get("dampening", 0.0),
                   kw.get("weight_decay", 0.0), kw.get("nesterov", False))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert float(np_(opt.global_step)) == STEPS


def test_momentum_is_sgd_with_momentum():
    init, params, grads = make(seed=1)
    got = run(nn.Momentum(params, 0.1, 0.9, use_nesterov=True), params, grads)
    for g, w in zip(got, sgd_ref(init, grads, 0.1, 0.9, nesterov=True)):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("cls,kw", [(nn.Adam, dict()), (nn.Adam, dict(weight_decay=0.1)),
                                    (nn.Adam, dict(amsgrad=True)), (nn.AdamW, dict()),
                                    (nn.AdamW, dict(weight_decay=0.3, beta1=0.8, beta2=0.99, eps=1e-6))])
@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "jit"])
def test_adam_family_matches_numpy(cls, kw, graph):
    init, params, grads = make(seed=2)
    opt = cls(params, learning_rate=0.01, **kw)
    got = run(opt, params, grads, graph)
    want = adam_ref(init, grads, 0.01, kw.get("beta1", 0.9), kw.get("beta2", 0.999), kw.get("eps", 1e-8),
                    kw.get("weight_decay", 0.01 if cls is nn.AdamW else 0.0), cls is nn.AdamW,
                    kw.get("amsgrad", False))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)


def test_float32_params_and_state_names():
    init, params, grads = make(np.float32, seed=3)
    opt = nn.Adam(params, 0.01)
    got = run(opt, params, grads)
    want = adam_ref([a.astype(np.float64) for a in init], [[g.astype(np.float64) for g in gs] for gs in grads], 0.01)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    names = [n for n, _ in opt.parameters_and_names()]
    assert names[0] == "global_step" and "adam_m.p0" in names and "adam_v.p2" in names
    assert "learning_rate" in names


def test_clip_norm_in_the_update_and_as_a_cell():
    init, params, grads = make(seed=4)
    grads = [[g * 10 for g in gs] for gs in grads]
    opt = nn.Adam(params, 0.01, clip_norm=1.0)
    got = run(opt, params, grads)
    norms = [math.sqrt(sum((g * g).sum() for g in gs)) for gs in grads]
    scale = [min(1.0, 1.0 / (n + 1e-6)) for n in norms]
    for g, w in zip(got, adam_ref(init, grads, 0.01, scale=scale)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    clipped = nn.ClipByGlobalNorm(2.0)([spora.Tensor(g) for g in grads[0]])
    for c, g in zip(clipped, grads[0]):
        np.testing.assert_allclose(np_(c), g * 2.0 / (norms[0] + 1e-6), rtol=1e-10)
    np.testing.assert_allclose(np_(nn.global_norm([spora.Tensor(g) for g in grads[0]])), norms[0], rtol=1e-12)


def test_parameter_groups_have_their_own_lr_and_weight_decay():
    init, params, grads = make(seed=5)
    opt = nn.SGD([{"params": params[:1], "lr": 0.5, "weight_decay": 0.1}, {"params": params[1:]}],
                 learning_rate=0.05, momentum=0.9)
    got = run(opt, params, grads)
    first = sgd_ref(init[:1], [gs[:1] for gs in grads], 0.5, 0.9, wd=0.1)
    rest = sgd_ref(init[1:], [gs[1:] for gs in grads], 0.05, 0.9)
    for g, w in zip(got, first + rest):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_set_learning_rate_changes_rate_without_recompiling():
    init, params, grads = make(seed=6)
    opt = nn.SGD(params, 0.1)
    step = spora.jit(lambda gs: opt(gs))
    step([spora.Tensor(g) for g in grads[0]])
    opt.set_learning_rate(0.01)
    assert opt.get_lr() == pytest.approx(0.01)
    step([spora.Tensor(g) for g in grads[1]])
    assert step.stats["traces"] == 1
    want = sgd_ref(init, grads[:2], None, lrs=[0.1, 0.01])
    for p, w in zip(params, want):
        np.testing.assert_allclose(np_(p), w, rtol=1e-12)


# -- schedules ---------------------------------------------------------------------------

def test_schedules_as_functions_of_the_step():
    s = nn.StepLR(0.1, step_size=3, gamma=0.5)
    assert s.values(8) == pytest.approx([0.1] * 3 + [0.05] * 3 + [0.025] * 2)
    c = nn.CosineDecayLR(0.0, 1.0, decay_steps=4)
    assert c.values(6) == pytest.approx([1.0, (1 + math.cos(math.pi / 4)) / 2, 0.5,
                                         (1 + math.cos(3 * math.pi / 4)) / 2, 0.0, 0.0])
    w = nn.WarmupLR(0.4, warmup_steps=4)
    assert w.values(6) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4])
    wc = nn.WarmupLR(nn.CosineDecayLR(0.0, 1.0, 2), warmup_steps=2)
    assert wc.values(5) == pytest.approx([0.5, 1.0, 1.0, 0.5, 0.0])
    per_epoch = nn.StepLR(1.0, step_size=1, gamma=0.1, steps_per_epoch=3)
    assert per_epoch.values(7) == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01])
    # the same schedule on a scalar tensor (what runs inside a graph)
    for sched in (s, c, w, wc, per_epoch):
        for t in range(7):
            got = float(np_(sched(spora.Tensor(np.array(t, np.float32)))))
            assert got == pytest.approx(sched(t), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "jit"])
def test_optimizer_follows_schedule(graph):
    init, params, grads = make(seed=7)
    sched = nn.WarmupLR(nn.StepLR(0.2, 2, 0.5), warmup_steps=2)
    opt = nn.SGD(params, learning_rate=sched, momentum=0.5)
    got = run(opt, params, grads, graph)
    want = sgd_ref(init, grads, None, momentum=0.5, lrs=sched.values(STEPS))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)  # the rate is computed in f32
    assert opt.get_lr() == pytest.approx(sched(STEPS))


def test_optimizer_argument_errors():
    p = [spora.Parameter(spora.Tensor(np.zeros(2)), name="w")]
    with pytest.raises(ValueError, match="nesterov"):
        nn.SGD(p, 0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta1"):
        nn.Adam(p, beta1=1.0)
    with pytest.raises(ValueError, match="requires_grad=False"):
        nn.SGD([spora.Parameter(spora.Tensor(np.zeros(2)), name="f", requires_grad=False)], 0.1)
    with pytest.raises(ValueError, match="empty"):
        nn.SGD([], 0.1)
    opt = nn.SGD(p, 0.1)
    with pytest.raises(ValueError, match=r"\[SGD\] got 2 gradients for 1 parameters"):
        opt([spora.Tensor(np.zeros(2)), spora.Tensor(np.zeros(2))])
    with pytest.raises(ValueError, match=r"gradient of 'w' has shape \(3,\)"):
        opt([spora.Tensor(np.zeros(3))])
