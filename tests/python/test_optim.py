"""The optimizer ops (docs/ops-optim.md) in use: multi-step updates against
PyTorch's optimizers (skipped without torch), a training loop compiled as a
graph (lr and step as graph inputs, an LR schedule) against numpy and
against the same graph run eagerly, in-place memory planning of the
multi-output updates, and eager calls leaving their inputs alone."""
import math

import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
CPU = CTX.device_find("cpu")
DEVICES = CTX.devices()


def T(a, dev=CPU):
    a = np.asarray(a)
    return S.Tensor.from_numpy(dev, np.ascontiguousarray(a) if a.ndim else a.copy())


def scalar(v, dtype=np.float32, dev=CPU):
    return S.Tensor.from_numpy(dev, np.asarray(v, dtype))


SHAPES = [(7, 5), (5,), (), (3, 2, 4)]


def _group(rng, dtype):
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(6)]  # one set per step
    return params, grads


# -- against PyTorch ----------------------------------------------------------

@pytest.mark.parametrize("dev", DEVICES, ids=[d.name for d in DEVICES])
@pytest.mark.parametrize("cfg", [
    dict(momentum=0.0, weight_decay=0.0),
    dict(momentum=0.9, weight_decay=0.01),
    dict(momentum=0.9, nesterov=True, weight_decay=0.001),
    dict(momentum=0.8, dampening=0.3),
], ids=["plain", "momentum", "nesterov", "dampening"])
def test_sgd_matches_torch(dev, cfg):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    params, grads = _group(rng, np.float32)
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    opt = torch.optim.SGD(tp, lr=0.05, **cfg)
    n = len(params)
    ps = [T(p, dev) for p in params]
    bufs = [T(np.zeros(p.shape, np.float32), dev) for p in params]
    lr, one = scalar(0.05, dev=dev), scalar(1.0, dev=dev)
    for step, gset in enumerate(grads):
        for t, g in zip(tp, gset):
            t.grad = torch.tensor(g)
        opt.step()
        attrs = dict(cfg)
        # PyTorch's first step sets the buffer to g, undamped: dampening 0
        # on a zero buffer does the same (docs/ops-optim.md).
        if step == 0:
            attrs["dampening"] = 0.0
        with_bufs = cfg["momentum"] > 0
        ins = [lr, one] + ps + [T(g, dev) for g in gset] + (bufs if with_bufs else [])
        outs = S.op_call("sgd_update", ins, attrs, num_outputs=2 * n if with_bufs else n)
        ps, bufs = outs[:n], (outs[n:] if with_bufs else bufs)
    for got, want in zip(ps, tp):
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("dev", DEVICES, ids=[d.name for d in DEVICES])
@pytest.mark.parametrize("cfg", [
    dict(kind="Adam"),
    dict(kind="Adam", weight_decay=0.01, amsgrad=True),
    dict(kind="AdamW", weight_decay=0.1),
    dict(kind="AdamW", weight_decay=0.05, amsgrad=True, betas=(0.8, 0.95), eps=1e-6),
], ids=["adam", "adam-l2-amsgrad", "adamw", "adamw-amsgrad-betas"])
def test_adam_matches_torch(dev, cfg):
    torch = pytest.importorskip("torch")
    cfg = dict(cfg)
    kind = cfg.pop("kind")
    rng = np.random.default_rng(2)
    params, grads = _group(rng, np.float32)
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    opt = getattr(torch.optim, kind)(tp, lr=0.01, foreach=False, **cfg)
    n = len(params)
    beta1, beta2 = cfg.get("betas", (0.9, 0.999))
    attrs = {"beta1": beta1, "beta2": beta2, "eps": cfg.get("eps", 1e-8),
             "weight_decay": cfg.get("weight_decay", 0.01 if kind == "AdamW" else 0.0),
             "decoupled": kind == "AdamW", "amsgrad": cfg.get("amsgrad", False)}
    roles = 4 + attrs["amsgrad"]
    ps = [T(p, dev) for p in params]
    states = [T(np.zeros(p.shape, np.float32), dev) for _ in range(roles - 2) for p in params]
    lr = scalar(0.01, dev=dev)
    for step, gset in enumerate(grads, start=1):
        for t, g in zip(tp, gset):
            t.grad = torch.tensor(g)
        opt.step()
        ins = [lr, scalar(step, np.int64, dev), scalar(1.0, dev=dev)] + ps + [T(g, dev) for g in gset] + states
        outs = S.op_call("adam_update", ins, attrs, num_outputs=(roles - 1) * n)
        ps, states = outs[:n], outs[n:]
    for k, (got, want) in enumerate(zip(ps, tp)):
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=3e-5, atol=3e-6, err_msg=f"param {k}")
    st = opt.state[tp[0]]
    np.testing.assert_allclose(states[0].numpy(), st["exp_avg"].numpy(), rtol=3e-5, atol=1e-7)
    np.testing.assert_allclose(states[n].numpy(), st["exp_avg_sq"].numpy(), rtol=3e-5, atol=1e-9)


def test_clip_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for max_norm in (0.5, 1e3):
        xs = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        tp = [torch.zeros(x.shape, requires_grad=True) for x in xs]
        for t, x in zip(tp, xs):
            t.grad = torch.tensor(x)
        norm = torch.nn.utils.clip_grad_norm_(tp, max_norm)
        outs = S.op_call("clip_by_global_norm", [T(x) for x in xs], {"max_norm": max_norm}, num_outputs=len(xs) + 1)
        np.testing.assert_allclose(outs[-1].numpy(), norm.numpy(), rtol=1e-6)
        for got, t in zip(outs, tp):
            np.testing.assert_allclose(got.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)


# -- grad_scale as the clip factor ------------------------------------------

def test_grad_scale_clips_without_a_separate_pass():
    rng = np.random.default_rng(4)
    params, grads = _group(rng, np.float64)
    gs = grads[0]
    n = len(params)
    norm = S.op_call("global_norm", [T(g) for g in gs])[0]
    # factor = min(1, max_norm / (norm + 1e-6)) with scalar ops
    f = S.run("minimum", scalar(1.0, np.float64),
              S.run("div", scalar(0.5, np.float64), S.run("add", norm, scalar(1e-6, np.float64))))
    fused = S.op_call("sgd_update", [scalar(0.1, np.float64), f] + [T(p) for p in params] + [T(g) for g in gs],
                      num_outputs=n)
    clipped = S.op_call("clip_by_global_norm", [T(g) for g in gs], {"max_norm": 0.5}, num_outputs=n + 1)
    plain = S.op_call("sgd_update", [scalar(0.1, np.float64), scalar(1.0, np.float64)] + [T(p) for p in params] +
                      clipped[:n], num_outputs=n)
    want_norm = math.sqrt(sum(float(np.sum(g * g)) for g in gs))
    np.testing.assert_allclose(norm.numpy(), want_norm, rtol=1e-14)
    assert want_norm > 0.5  # the factor really clips
    for a, b, p, g in zip(fused, plain, params, gs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(a.numpy(), p - 0.1 * g * 0.5 / (want_norm + 1e-6), rtol=1e-13)


# -- a compiled training loop -----------------------------------------------

def _linear_regression_step(dt, B, I, O, kind):
    """Graph: loss = mean((x @ w^T + b - y)^2), gradients, one optimizer
    update with lr (and step) as graph inputs. Returns (graph, n_out)."""
    g = S.Graph("train")
    x, y = g.input("x", dt, [B, I]), g.input("y", dt, [B, O])
    w, b = g.weight("w", dt, [O, I]), g.weight("b", dt, [O])
    pred = g.op("linear", [x, w, b])[0]
    g.set_outputs([g.op("mean", [g.op("square", [g.op("sub", [pred, y])[0]])[0]])[0]])
    gg = g.grad([w, b])
    loss, gw, gb = gg.outputs()
    lr = gg.input("lr", dt, [])
    one = gg.constant(S.Tensor.from_numpy(CPU, np.array(1.0, np.float64 if dt == S.DTYPE_F64 else np.float32)))
    if kind == "sgd":
        mw, mb = gg.weight("mw", dt, [O, I]), gg.weight("mb", dt, [O])
        outs = gg.op("sgd_update", [lr, one, w, b, gw, gb, mw, mb], {"momentum": 0.9, "weight_decay": 0.01},
                     file="train.py", line=7)
    else:
        step = gg.input("step", S.DTYPE_I64, [])
        st = [gg.weight(f"{r}{k}", dt, s) for r in ("m", "v") for k, s in (("w", [O, I]), ("b", [O]))]
        outs = gg.op("adam_update", [lr, step, one, w, b, gw, gb] + st, {"weight_decay": 0.05, "decoupled": True},
                     file="train.py", line=7)
    gg.set_outputs([loss] + outs)
    return gg, 1 + len(outs)


def _numpy_grads(x, y, w, b):
    pred = x @ w.T + b
    d = 2 * (pred - y) / pred.size
    return float(np.mean((pred - y) ** 2)), d.T @ x, d.sum(0)


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_compiled_training_loop_matches_numpy_and_eager(kind):
    B, I, O, steps = 32, 6, 3, 8
    rng = np.random.default_rng(5)
    x = rng.standard_normal((B, I))
    y = x @ rng.standard_normal((O, I)).T + 0.1 * rng.standard_normal((B, O))
    w0, b0 = 0.1 * rng.standard_normal((O, I)), np.zeros(O)
    lrs = [0.05 * 0.5 * (1 + math.cos(math.pi * s / steps)) + 1e-3 for s in range(steps)]  # cosine schedule
    g, n_out = _linear_regression_step(S.DTYPE_F64, B, I, O, kind)
    # numpy loop
    w, b = w0.copy(), b0.copy()
    st = [np.zeros_like(w), np.zeros_like(b), np.zeros_like(w), np.zeros_like(b)]
    losses = []
    for s, lr in enumerate(lrs, start=1):
        loss, gw, gb = _numpy_grads(x, y, w, b)
        losses.append(loss)
        if kind == "sgd":
            for k, (p, gr) in enumerate(((w, gw), (b, gb))):
                d = gr + 0.01 * p
                st[k] = 0.9 * st[k] + d
                p -= lr * st[k]
        else:
            for k, (p, gr) in enumerate(((w, gw), (b, gb))):
                p *= 1 - lr * 0.05
                st[k] = 0.9 * st[k] + 0.1 * gr
                st[2 + k] = 0.999 * st[2 + k] + 0.001 * gr * gr
                p -= lr / (1 - 0.9 ** s) * st[k] / (np.sqrt(st[2 + k]) / np.sqrt(1 - 0.999 ** s) + 1e-8)
    assert losses[-1] < losses[0]  # it trains
    for dev in DEVICES:
        exe = g.compile(dev)
        state = [T(w0, dev), T(b0, dev)] + [T(np.zeros(a.shape), dev) for a in st[:2 if kind == "sgd" else 4]]
        eager_state = list(state)
        for s, lr in enumerate(lrs, start=1):
            # Params in graph order: x, y, w, b, then lr, the states (weights),
            # step: bound by creation order.
            extra = {"lr": T(np.array(lr), dev), "step": T(np.array(s, np.int64), dev)}
            def bind(vals):
                w_, b_, *rest = vals
                if kind == "sgd":
                    return [T(x, dev), T(y, dev), w_, b_, extra["lr"]] + rest
                return [T(x, dev), T(y, dev), w_, b_, extra["lr"], extra["step"]] + rest
            outs = exe.run(bind(state), n_out)
            eager = g.run_eager(dev, bind(eager_state), n_out)
            np.testing.assert_allclose(outs[0].numpy(), losses[s - 1], rtol=1e-11)
            state, eager_state = outs[1:], eager[1:]
        np.testing.assert_allclose(state[0].numpy(), w, rtol=1e-10, atol=1e-12, err_msg=dev.name)
        np.testing.assert_allclose(state[1].numpy(), b, rtol=1e-10, atol=1e-12, err_msg=dev.name)
        for a, e in zip(state, eager_state):
            np.testing.assert_array_equal(a.numpy(), e.numpy())


# -- in-place planning ------------------------------------------------------

N = 4096  # f32 elements: 16 KiB per buffer


def _in_place_graph(momentum):
    """p = neg(w), q = neg(u) live in the arena; the update's outputs feed a
    sum, so they are arena values too and may take over p (and the buffer)."""
    g = S.Graph("inplace")
    w, u, lr = g.input("w", S.DTYPE_F32, [N]), g.input("u", S.DTYPE_F32, [N]), g.input("lr", S.DTYPE_F32, [])
    p, q = g.op("neg", [w])[0], g.op("neg", [u])[0]
    one = g.constant(scalar(1.0))
    ins = [lr, one, p, q]
    if momentum:
        ins.append(g.op("exp", [u])[0])
    outs = g.op("sgd_update", ins, {"momentum": momentum} if momentum else None)
    total = g.op("sum", [outs[0]])[0]
    for o in outs[1:]:
        total = g.op("add", [total, g.op("sum", [o])[0]])[0]
    g.set_outputs([total])
    return g


@pytest.mark.parametrize("dev", DEVICES, ids=[d.name for d in DEVICES])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_updates_compute_in_place_in_the_arena(dev, momentum):
    rng = np.random.default_rng(6)
    w, u = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    g = _in_place_graph(momentum)
    exe = g.compile(dev)
    planned, naive = exe.memory()
    buf = N * 4
    # Without in place: p, q (, buf) and the new p (, new buf) at once.
    # With it: each output takes its input's buffer.
    live = 3 if momentum else 2
    assert planned <= live * buf + 256, (planned, naive)
    assert naive >= (2 * live - 1) * buf
    got = exe.run([T(w, dev), T(u, dev), scalar(0.1, dev=dev)], 1)[0].numpy()
    p, q = -w.astype(np.float64), -u.astype(np.float64)
    if momentum:
        bnew = momentum * np.exp(u.astype(np.float64)) + q
        want = np.sum(p - 0.1 * bnew) + np.sum(bnew)
    else:
        want = np.sum(p - 0.1 * q)
    np.testing.assert_allclose(got, want, rtol=1e-4)


@pytest.mark.parametrize("dev", DEVICES, ids=[d.name for d in DEVICES])
def test_input_read_twice_is_not_overwritten(dev):
    """p0 is param 0 and also grad 1: writing new p0 over it would corrupt
    tensor 1's update (the kernel runs tensor 1 after, or beside, tensor 0)."""
    rng = np.random.default_rng(7)
    w0, w1 = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    g = S.Graph("shared")
    a, c, lr = g.input("a", S.DTYPE_F32, [N]), g.input("c", S.DTYPE_F32, [N]), g.input("lr", S.DTYPE_F32, [])
    p0, p1 = g.op("neg", [a])[0], g.op("neg", [c])[0]
    one = g.constant(scalar(1.0))
    n0, n1 = g.op("sgd_update", [lr, one, p0, p1, p1, p0])
    g.set_outputs([g.op("mul", [n0, n1])[0]])
    got = g.compile(dev).run([T(w0, dev), T(w1, dev), scalar(0.5, dev=dev)], 1)[0].numpy()
    q0, q1 = -w0.astype(np.float64), -w1.astype(np.float64)
    np.testing.assert_allclose(got, (q0 - 0.5 * q1) * (q1 - 0.5 * q0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dev", DEVICES, ids=[d.name for d in DEVICES])
def test_clip_in_place_in_the_arena(dev):
    rng = np.random.default_rng(8)
    w = rng.standard_normal(N).astype(np.float32)
    g = S.Graph("clip")
    x = g.input("x", S.DTYPE_F32, [N])
    p = g.op("neg", [x])[0]
    clipped, norm = g.op("clip_by_global_norm", [p], {"max_norm": 2.0})
    g.set_outputs([g.op("sum", [g.op("mul", [clipped, clipped])[0]])[0], norm])
    exe = g.compile(dev)
    planned, _ = exe.memory()
    assert planned <= 2 * N * 4 + 256  # p, then clipped over p; the product
    total, nrm = (o.numpy() for o in exe.run([T(w, dev)], 2))
    np.testing.assert_allclose(nrm, np.linalg.norm(w.astype(np.float64)), rtol=1e-6)
    f = min(1.0, 2.0 / (float(nrm) + 1e-6))
    assert f < 1
    np.testing.assert_allclose(total, f * f * float(np.sum(w.astype(np.float64) ** 2)), rtol=1e-4)


# -- eager ------------------------------------------------------------------

def test_eager_returns_fresh_tensors_and_leaves_inputs():
    rng = np.random.default_rng(9)
    p, g, m, v = (rng.standard_normal(5).astype(np.float32) for _ in range(4))
    v = np.abs(v)
    ins = [T(a) for a in (p, g, m, v)]
    outs = S.op_call("adam_update", [scalar(0.1), scalar(3, np.int64), scalar(1.0)] + ins, num_outputs=3)
    for t, a in zip(ins, (p, g, m, v)):
        np.testing.assert_array_equal(t.numpy(), a)
    assert not np.array_equal(outs[0].numpy(), p)
    for o in outs:
        assert all(o.handle != t.handle for t in ins)


# -- in place through spora_op_call_into ------------------------------------

@pytest.mark.parametrize("dev", DEVICES, ids=[d.name for d in DEVICES])
def test_call_into_updates_params_and_state_in_place(dev):
    """Six AdamW steps written into the params' and states' own tensors
    (no allocation) give the numbers of six steps with fresh outputs."""
    rng = np.random.default_rng(12)
    params, grads = _group(rng, np.float32)
    n = len(params)
    attrs = {"weight_decay": 0.01, "decoupled": True, "amsgrad": True}
    ps = [T(p, dev) for p in params]
    st = [T(np.zeros(p.shape, np.float32), dev) for _ in range(3) for p in params]
    fresh_p, fresh_st = list(ps), list(st)
    ps = [T(p, dev) for p in params]  # separate tensors for the in-place run
    st = [T(np.zeros(p.shape, np.float32), dev) for _ in range(3) for p in params]
    handles = [t.handle for t in ps + st]
    for step, gset in enumerate(grads, start=1):
        g = [T(x, dev) for x in gset]
        head = [scalar(0.01, dev=dev), scalar(step, np.int64, dev), scalar(1.0, dev=dev)]
        outs = S.op_call("adam_update", head + fresh_p + g + fresh_st, attrs, num_outputs=4 * n)
        fresh_p, fresh_st = outs[:n], outs[n:]
        S.op_call_into("adam_update", head + ps + g + st, ps + st, attrs)
    assert [t.handle for t in ps + st] == handles
    for a, b in zip(ps + st, fresh_p + fresh_st):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(ps[0].numpy(), params[0])


def test_call_into_sgd_and_clip_in_place():
    rng = np.random.default_rng(13)
    p, g, b = (rng.standard_normal(50).astype(np.float32) for _ in range(3))
    tp, tg, tb = T(p), T(g), T(b)
    S.op_call_into("sgd_update", [scalar(0.1), scalar(1.0), tp, tg, tb], [tp, tb], {"momentum": 0.9})
    nb = 0.9 * b.astype(np.float64) + g
    np.testing.assert_allclose(tb.numpy(), nb, rtol=1e-6)
    np.testing.assert_allclose(tp.numpy(), p - 0.1 * nb, rtol=1e-6, atol=1e-7)
    norm = scalar(0.0)
    S.op_call_into("clip_by_global_norm", [tg], [tg, norm], {"max_norm": 1.0})
    n = np.linalg.norm(g.astype(np.float64))
    np.testing.assert_allclose(norm.numpy(), n, rtol=1e-6)
    np.testing.assert_allclose(tg.numpy(), g * (1.0 / (n + 1e-6)), rtol=1e-6)


def test_call_into_into_fresh_tensors_and_ordinary_ops():
    a, c = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
    out = T(np.zeros((2, 3), np.float32))
    S.op_call_into("add", [T(a), T(c)], [out])
    np.testing.assert_array_equal(out.numpy(), a + 1)


def expect_into(op, inputs, outputs, attrs, fragment):
    with pytest.raises(S.SporaError) as info:
        S.op_call_into(op, inputs, outputs, attrs)
    assert info.value.status == S.ERROR_INVALID_ARGUMENT
    assert info.value.message.startswith(f"[{op}]") and fragment in info.value.message, info.value.message


def test_call_into_refuses_bad_outputs_and_writes_nothing():
    p, g, b = (np.full(4, v, np.float32) for v in (1.0, 2.0, 3.0))
    tp, tg, tb = T(p), T(g), T(b)
    lr, one = scalar(0.1), scalar(1.0)
    mom = {"momentum": 0.9}
    # output 0 (new param) over the grad, and over the buffer
    expect_into("sgd_update", [lr, one, tp, tg, tb], [tg, tb], mom, "output 0 overlaps input 3; output 0 may only be input 2")
    expect_into("sgd_update", [lr, one, tp, tg, tb], [tb, tp], mom, "output 0 overlaps input 4")
    # the param is also passed as the grad: updating it in place would corrupt the read
    expect_into("sgd_update", [lr, one, tp, tp, tb], [tp, tb], mom, "output 0 would overwrite input 2, which input 3 also reads")
    # two outputs in one tensor
    other = T(np.zeros(4, np.float32))
    expect_into("sgd_update", [lr, one, tp, tg, tb], [other, other], mom, "outputs 0 and 1 overlap")
    # wrong dtype / shape / count; ordinary ops never compute in place
    expect_into("sgd_update", [lr, one, tp, tg, tb], [T(np.zeros(4, np.float64)), tb], mom, "output 0 must be f32 (4,), got f64 (4,)")
    expect_into("sgd_update", [lr, one, tp, tg, tb], [T(np.zeros(5, np.float32)), tb], mom, "output 0 must be f32 (4,)")
    expect_into("sgd_update", [lr, one, tp, tg, tb], [tp], mom, "produces 2 output(s), caller asked for 1")
    expect_into("add", [tp, tg], [tp], None, "output 0 overlaps input 0; the op does not compute this output in place")
    for t, a in ((tp, p), (tg, g), (tb, b)):
        np.testing.assert_array_equal(t.numpy(), a)
