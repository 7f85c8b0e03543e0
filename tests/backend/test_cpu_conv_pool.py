"""conv_pool_fusion and the cpu plugin's conv2d_act_pool (issue 19's layout
selection): a conv2d_act read by a max_pool2d becomes one op whose kernel
pools the activation in the layout oneDNN's convolution wrote.

- Graphs: the optimised graph (O1) holds conv2d_act_pool, with the
  activation kept as a second output where the backward pass reads it, and
  its results -- forward and every gradient of a training graph -- match the
  unoptimised graph's and numpy's; SPORA_CONV_POOL_FUSION=0 keeps the two
  ops.
- Layouts: oneDNN's verbose log of a run, at the machine's ISA and with
  ONEDNN_MAX_CPU_ISA=AVX2, shows the pooling reading the convolution's
  output in its blocked layout (nChw16c on AVX-512, nChw8c on AVX2) with
  no reorder between the two, and no simple_* or ref pooling anywhere.
- Backward (conv_pool_grad_fusion, conv2d_act_pool_grad): the training
  graph's max_pool2d_grad, relu mask, bias sum and convolution gradients
  become one op per layer; its gradients match the unfused graph's and
  numpy's at both ISAs, the relu-masked pooling gradient it builds is the
  decomposition's bit for bit (NaN, ties, windows cut off, channels
  padding a block), and the verbose log shows both backward convolutions
  reading that one blocked gradient, with no reorder of an
  activation-sized tensor into blocks.
- Blocked hand-over of the kept activation (blocked_handoff: output 1 in
  the forward op's blocked_outputs, input 2 in the backward op's
  blocked_inputs): where the kept activation's only reader is the backward
  op and its channels are a multiple of 16, the pass marks both ops and
  the activation stays in the plugin's blocked
  layout between them; training steps with and without the flag
  (SPORA_CONV_POOL_FUSION=unblocked) agree bit for bit at both ISAs, the
  flag is not set for another reader, a graph output or 6 channels, sim
  runs a flagged graph through the decompositions, and the verbose log
  shows no activation-sized reorder to NCHW in a flagged forward.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

# Also run as a script (the verbose child below): the ctypes binding lives
# with the C API tests, as conftest.py says.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import harness as H  # noqa: E402
import spora_capi as S  # noqa: E402
from refs import REFS  # noqa: E402

CONV = {"padding": [1, 1], "activation": "relu"}
POOL = {"kernel_size": [2, 2]}


@pytest.fixture(scope="module")
def cpu():
    c = S.Context()
    yield c.device_find("cpu")
    c.free()


def _graph(shape, out_ch, train, extra=None):
    """conv2d_act (3x3, padding 1, relu) -> max_pool2d 2x2 -> sum(y * r):
    the loss, and for training its gradients with respect to x, w and b.
    The second output is y, or with `extra` the activation itself
    ("output") or another op reading it ("reader")."""
    n, c, h, w = shape
    g = S.Graph("convpool")
    x = g.input("x", S.DTYPE_F32, list(shape))
    wt = g.input("w", S.DTYPE_F32, [out_ch, c, 3, 3])
    b = g.input("b", S.DTYPE_F32, [out_ch])
    r = g.input("r", S.DTYPE_F32, [n, out_ch, h // 2, w // 2])
    a = g.op("conv2d_act", [x, wt, b], CONV)[0]
    y = g.op("max_pool2d", [a], POOL)[0]
    loss = g.op("sum", [g.op("mul", [y, r])[0]])[0]
    if extra == "output":
        y = a
    elif extra == "reader":
        y = g.op("sum", [g.op("mul", [a, a])[0]])[0]
    g.set_outputs([loss, y])
    if train:
        g = g.grad([x, wt, b])  # outputs: loss, dx, dw, db (grad of output 0)
    return g


def _values(shape, out_ch, rng):
    n, c, h, w = shape
    return [rng.standard_normal(shape).astype(np.float32),
            (rng.standard_normal((out_ch, c, 3, 3)) * 0.3).astype(np.float32),
            rng.standard_normal(out_ch).astype(np.float32),
            rng.standard_normal((n, out_ch, h // 2, w // 2)).astype(np.float32)]


def _run(g, cpu, vals, num_outputs):
    ts = [H.to_spora(cpu, v, "f32") for v in vals]
    return [t.numpy() for t in g.compile(cpu).run(ts, num_outputs)]


def _optimized(g):
    o = S.Graph.from_json(g.json())
    o.optimize(1)
    return o


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("shape,out_ch", [((4, 1, 28, 28), 32), ((3, 16, 14, 14), 64), ((2, 3, 9, 10), 6)],
                         ids=["first-layer", "second-layer", "odd"])
def test_fused_graph_matches_unfused_and_numpy(cpu, monkeypatch, train, shape, out_ch):
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    vals = _values(shape, out_ch, np.random.default_rng(3))
    g = _graph(shape, out_ch, train)
    o = _optimized(g)
    text = o.text()
    assert "conv2d_act_pool" in text and "max_pool2d(" not in text, text
    # Training reads the activation in max_pool2d_grad and the relu mask.
    assert ("keep_activation=true" in text) == train, text
    n_out = 5 if train else 2  # training: loss, y, dx, dw, db
    want, got = _run(g, cpu, vals, n_out), _run(o, cpu, vals, n_out)
    for i, (gv, wv) in enumerate(zip(got, want)):
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=f"output {i}, fused vs unfused")
    if not train:
        act = REFS["conv2d_act"]([v.astype(np.float64) for v in vals[:3]], CONV)[0]
        y = REFS["max_pool2d"]([act], POOL)[0]
        np.testing.assert_allclose(got[1], y, rtol=1e-4, atol=1e-4, err_msg="pooled output vs numpy")


def test_second_pooling_reads_the_kept_activation_and_sim_decomposes(cpu, monkeypatch):
    """Two poolings of one activation: the first is fused, the second reads
    output 1. The sim device has no kernel for the fused op and runs its
    decomposition; both devices agree with the unfused graph."""
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    shape = (2, 3, 12, 12)
    g = S.Graph("twopools")
    x = g.input("x", S.DTYPE_F32, list(shape))
    wt = g.input("w", S.DTYPE_F32, [16, 3, 3, 3])
    b = g.input("b", S.DTYPE_F32, [16])
    a = g.op("conv2d_act", [x, wt, b], CONV)[0]
    y1 = g.op("max_pool2d", [a], POOL)[0]
    y2 = g.op("max_pool2d", [a], {"kernel_size": [3, 3], "stride": [3, 3]})[0]
    g.set_outputs([y1, y2])
    o = _optimized(g)
    text = o.text()
    assert text.count("conv2d_act_pool(") == 1 and "keep_activation=true" in text, text
    assert text.count("max_pool2d(") == 1 and ".1)" in text, text
    rng = np.random.default_rng(5)
    vals = [rng.standard_normal(shape).astype(np.float32), rng.standard_normal((16, 3, 3, 3)).astype(np.float32),
            rng.standard_normal(16).astype(np.float32)]
    want = _run(g, cpu, vals, 2)
    sim = S.Context().device_find("sim")
    for dev in (cpu, sim):
        for i, (gv, wv) in enumerate(zip(_run(o, dev, vals, 2), want)):
            np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=f"{dev} output {i}")


def test_switch_keeps_the_two_ops(monkeypatch):
    monkeypatch.setenv("SPORA_CONV_POOL_FUSION", "0")
    text = _optimized(_graph((2, 1, 8, 8), 16, True)).text()
    assert "conv2d_act_pool" not in text and "max_pool2d(" in text, text
    monkeypatch.setenv("SPORA_CONV_POOL_FUSION", "infer")
    assert "conv2d_act_pool" not in _optimized(_graph((2, 1, 8, 8), 16, True)).text()
    assert "conv2d_act_pool" in _optimized(_graph((2, 1, 8, 8), 16, False)).text()
    # =forward: the forward fusion only, the backward ops stay apart.
    monkeypatch.setenv("SPORA_CONV_POOL_FUSION", "forward")
    text = _optimized(_graph((2, 1, 8, 8), 16, True)).text()
    assert "conv2d_act_pool(" in text and "conv2d_act_pool_grad" not in text and "max_pool2d_grad(" in text, text
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION")
    text = _optimized(_graph((2, 1, 8, 8), 16, True)).text()
    assert "conv2d_act_pool_grad(" in text and "max_pool2d_grad(" not in text, text


# ---- the backward pass: conv2d_act_pool_grad ----------------------------------------

@pytest.mark.parametrize("shape,out_ch", [((4, 1, 28, 28), 32), ((3, 16, 14, 14), 64), ((2, 3, 9, 10), 6)],
                         ids=["first-layer", "second-layer", "odd"])
def test_backward_is_one_op_and_matches_numpy(cpu, monkeypatch, shape, out_ch):
    """The training graph's backward ops become one conv2d_act_pool_grad;
    the loss's gradients match the graph with only the forward fused and
    numpy's (REFS, built from the parts' references)."""
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    vals = _values(shape, out_ch, np.random.default_rng(4))
    g = _graph(shape, out_ch, True)
    o = _optimized(g)
    text = o.text()
    assert text.count("conv2d_act_pool_grad(") == 1 and "input_grad=true" in text, text
    for gone in ("max_pool2d_grad(", "conv2d_grad_input(", "conv2d_grad_weight(", "greater(", "where("):
        assert gone not in text, (gone, text)
    monkeypatch.setenv("SPORA_CONV_POOL_FUSION", "forward")
    forward_only = _optimized(g)
    assert "conv2d_act_pool_grad" not in forward_only.text()
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION")
    got, want = _run(o, cpu, vals, 5), _run(forward_only, cpu, vals, 5)
    for i, (gv, wv) in enumerate(zip(got, want)):
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=f"output {i}, backward fused vs not")
    x, w, b, r = [v.astype(np.float64) for v in vals]
    act = REFS["conv2d_act"]([x, w, b], CONV)[0]
    attrs = dict(CONV, **{"pool_" + k: v for k, v in POOL.items()})
    attrs.pop("activation")
    dw, db, dx = REFS["conv2d_act_pool_grad"]([x, w, act, r], attrs)
    for name, gv, wv in (("dx", got[2], dx), ("dw", got[3], dw), ("db", got[4], db)):
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=f"{name} vs numpy")


def _hand_written_backward(cpu, x_first):
    """The backward ops of a conv + relu + 2x2 pooling, written by hand with
    a reader of dx placed before the weight gradient; x is declared before
    everything (x_first) or only after that reader."""
    n, c, h, w, o = 2, 8, 8, 8, 16
    g = S.Graph("order")
    x = g.input("x", S.DTYPE_F32, [n, c, h, w]) if x_first else None
    wt = g.input("w", S.DTYPE_F32, [o, c, 3, 3])
    a = g.input("a", S.DTYPE_F32, [n, o, h, w])
    dy = g.input("dy", S.DTYPE_F32, [n, o, h // 2, w // 2])
    zero = g.constant(H.to_spora(cpu, np.zeros((), np.float32), "f32"))
    p = g.op("max_pool2d_grad", [a, dy], POOL)[0]
    gr = g.op("where", [g.op("greater", [a, zero])[0], p, zero])[0]
    dx = g.op("conv2d_grad_input", [gr, wt], {"padding": [1, 1], "input_shape": [n, c, h, w]})[0]
    early = g.op("sum", [g.op("mul", [dx, dx])[0]])[0]
    if not x_first:
        x = g.input("x", S.DTYPE_F32, [n, c, h, w])
    dw = g.op("conv2d_grad_weight", [x, gr], {"padding": [1, 1], "weight_shape": [o, c, 3, 3]})[0]
    db = g.op("sum", [gr], {"axes": [0, 2, 3]})[0]
    g.set_outputs([early, dw, db])
    rng = np.random.default_rng(8)
    vals = {"w": rng.standard_normal((o, c, 3, 3)), "a": np.maximum(rng.standard_normal((n, o, h, w)), 0),
            "dy": rng.standard_normal((n, o, h // 2, w // 2)), "x": rng.standard_normal((n, c, h, w))}
    order = ["x", "w", "a", "dy"] if x_first else ["w", "a", "dy", "x"]
    return g, [vals[k].astype(np.float32) for k in order]


@pytest.mark.parametrize("x_first", [True, False], ids=["fused-before-the-reader", "x-too-late"])
def test_fusion_goes_before_the_first_reader_or_not_at_all(cpu, monkeypatch, x_first):
    """The fused op is placed before the first reader of its results; when
    one of its inputs is defined only after that reader it cannot be, and
    the ops stay apart. Either way the graph computes what it did."""
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    g, vals = _hand_written_backward(cpu, x_first)
    o = _optimized(g)
    assert ("conv2d_act_pool_grad(" in o.text()) == x_first, o.text()
    for i, (gv, wv) in enumerate(zip(_run(o, cpu, vals, 3), _run(g, cpu, vals, 3))):
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=f"output {i}")


def _mask_graph(shape, act, k=2):
    """conv2d_act_pool_grad over a 1x1 convolution with identity weights:
    its input gradient (output 2) is the relu-masked pooling gradient g the
    kernel builds, exactly (each element is g times 1 plus zeros)."""
    n, c, h, w = shape
    g = S.Graph("mask")
    x = g.input("x", S.DTYPE_F32, list(shape))
    wt = g.input("w", S.DTYPE_F32, [c, c, 1, 1])
    a = g.input("a", S.DTYPE_F32, list(shape))
    dy = g.input("dy", S.DTYPE_F32, [n, c, h // k, w // k])
    outs = g.op("conv2d_act_pool_grad", [x, wt, a, dy], {"activation": act, "pool_kernel_size": [k, k]})
    g.set_outputs(outs[:3])
    return g


def _mask_values(shape, rng, k=2):
    n, c, h, w = shape
    a = rng.standard_normal(shape).astype(np.float32)
    a[a < -1.5] = 0.0  # relu outputs: zeros, ...
    a[0, 0, 0, :2] = a[0, 0, 1, :2] = 2.0  # a tie (the first wins)
    a[0, min(1, c - 1), 2, 3] = np.nan  # a NaN (wins its window: masked to 0 by relu)
    a[-1, -1, :2, :2] = -0.0
    dy = rng.standard_normal((n, c, h // k, w // k)).astype(np.float32)
    dy[0, 0, -1, -1] = -0.0
    return [rng.standard_normal(shape).astype(np.float32), np.eye(c, dtype=np.float32).reshape(c, c, 1, 1), a, dy]


@pytest.mark.parametrize("act", ["relu", "none"])
@pytest.mark.parametrize("shape,k", [((2, 16, 9, 7), 2), ((3, 6, 8, 8), 2), ((2, 16, 9, 7), 3)],
                         ids=["cut-off-windows", "padded-block", "3x3-scalar-path"])
def test_masked_pooling_gradient_is_the_decompositions(cpu, monkeypatch, shape, k, act):
    vals = _mask_values(shape, np.random.default_rng(6), k)
    g = _mask_graph(shape, act, k)
    got = _run(g, cpu, vals, 3)
    # The sim device has no kernel for the op and runs the decomposition.
    sim = S.Context().device_find("sim")
    want = _run(g, sim, vals, 3)
    np.testing.assert_array_equal(got[2], want[2], err_msg="g (dx) vs the decomposition")
    zeros = got[2][got[2] == 0]
    assert zeros.size and not np.signbit(zeros).any(), "0 + dy and the mask's 0 are +0"
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5, err_msg="dw")
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5, err_msg="db")


# ---- the kept activation handed over in blocks (blocked_handoff) -----------------

def _kept(text):
    """How many ends of kept-activation hand-overs an IR text has: forward
    ops writing output 1 blocked plus backward ops reading input 2 so."""
    def ports(line, name):
        m = re.search(name + r"=\[([0-9, ]*)\]", line)
        return [int(v) for v in m.group(1).split(",")] if m else []
    n = 0
    for line in text.splitlines():
        if "conv2d_act_pool(" in line:
            n += 1 in ports(line, "blocked_outputs")
        elif "conv2d_act_pool_grad(" in line:
            n += 2 in ports(line, "blocked_inputs")
    return n


def _two_layer_step(shape, c1, c2):
    """Loss and gradients of conv(c1)+relu+pool -> conv(c2)+relu+pool ->
    sum(y * r): the shape of the main job's convolution blocks."""
    n, c, h, w = shape
    g = S.Graph("blocks")
    x = g.input("x", S.DTYPE_F32, list(shape))
    params = [g.input("w1", S.DTYPE_F32, [c1, c, 3, 3]), g.input("b1", S.DTYPE_F32, [c1]),
              g.input("w2", S.DTYPE_F32, [c2, c1, 3, 3]), g.input("b2", S.DTYPE_F32, [c2])]
    r = g.input("r", S.DTYPE_F32, [n, c2, h // 4, w // 4])
    p1 = g.op("max_pool2d", [g.op("conv2d_act", [x, params[0], params[1]], CONV)[0]], POOL)[0]
    p2 = g.op("max_pool2d", [g.op("conv2d_act", [p1, params[2], params[3]], CONV)[0]], POOL)[0]
    g.set_outputs([g.op("sum", [g.op("mul", [p2, r])[0]])[0]])
    return g.grad(params)


def _sgd_steps(cpu, setting, monkeypatch, shape=(4, 1, 16, 16), c1=16, c2=32, steps=3):
    """Losses and parameters after `steps` SGD steps of _two_layer_step,
    optimised with SPORA_CONV_POOL_FUSION=setting (None: unset)."""
    if setting is None:
        monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    else:
        monkeypatch.setenv("SPORA_CONV_POOL_FUSION", setting)
    g = _two_layer_step(shape, c1, c2)
    g.optimize(1)
    text = g.text()
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    rng = np.random.default_rng(11)
    n, c, h, w = shape
    x = rng.standard_normal(shape).astype(np.float32)
    r = rng.standard_normal((n, c2, h // 4, w // 4)).astype(np.float32)
    params = [(rng.standard_normal((c1, c, 3, 3)) * 0.3).astype(np.float32),
              rng.standard_normal(c1).astype(np.float32),
              (rng.standard_normal((c2, c1, 3, 3)) * 0.1).astype(np.float32),
              rng.standard_normal(c2).astype(np.float32)]
    exe = g.compile(cpu)
    losses = []
    for _ in range(steps):
        out = [t.numpy() for t in exe.run([H.to_spora(cpu, v, "f32") for v in [x, *params, r]], 5)]
        losses.append(out[0])
        params = [(p - np.float32(0.01) * d).astype(np.float32) for p, d in zip(params, out[1:])]
    return text, losses, params


def test_blocked_activation_gives_the_same_training_steps(cpu, monkeypatch):
    """Both layers flagged (16 and 32 channels); three SGD steps with the
    activation handed over in blocks and in NCHW give the same losses and
    parameters bit for bit (the same primitives read the same values), and
    match the unfused graph to the convolution's rounding."""
    text, losses, params = _sgd_steps(cpu, None, monkeypatch)
    assert _kept(text) == 4, text  # two pairs
    plain_text, plain_losses, plain_params = _sgd_steps(cpu, "unblocked", monkeypatch)
    assert "blocked_" not in plain_text and plain_text.count("conv2d_act_pool_grad(") == 2, plain_text
    for i, (a, b) in enumerate(zip(losses + params, plain_losses + plain_params)):
        np.testing.assert_array_equal(a, b, err_msg=f"value {i}, blocked vs NCHW hand-over")
    _, ref_losses, ref_params = _sgd_steps(cpu, "0", monkeypatch)
    for i, (a, b) in enumerate(zip(losses + params, ref_losses + ref_params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"value {i}, vs unfused")


@pytest.mark.parametrize("case", ["output", "reader", "6-channels", "forward-only"])
def test_blocked_activation_only_when_the_backward_op_alone_reads_it(cpu, monkeypatch, case):
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    if case in ("output", "reader"):
        g = _graph((2, 1, 8, 8), 16, True, extra=case)
    else:
        g = _graph((2, 3, 8, 8), 6 if case == "6-channels" else 16, case != "forward-only")
    o = _optimized(g)
    text = o.text()
    assert "keep_activation=true" in text or case == "forward-only", text
    if case != "forward-only":
        assert "conv2d_act_pool_grad(" in text, text  # fused, but not flagged
    assert _kept(text) == 0, text
    # The control: the same graph with 16 channels and no other reader is.
    assert _kept(_optimized(_graph((2, 1, 8, 8), 16, True)).text()) == 2


def test_flagged_graph_on_sim_runs_the_decompositions(cpu, monkeypatch):
    """Every graph is optimised for the host target, so a flagged graph can
    reach a device without the kernels (sim): there both ops decompose,
    ignore the flag and agree with the unoptimised graph on the cpu."""
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    shape, out_ch = (2, 1, 8, 8), 16
    g = _graph(shape, out_ch, True)
    o = _optimized(g)
    assert _kept(o.text()) == 2, o.text()
    vals = _values(shape, out_ch, np.random.default_rng(12))
    want = _run(g, cpu, vals, 5)
    sim = S.Context().device_find("sim")
    for dev in (sim, cpu):
        for i, (gv, wv) in enumerate(zip(_run(o, dev, vals, 5), want)):
            np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-4, err_msg=f"{dev} output {i}")


def _lenet5_second_layer(cpu, setting):
    """LeNet-5's second layer (6 -> 16 channels, 5x5, 2x2 pooling), its
    loss and gradients, optimised with SPORA_CONV_POOL_FUSION=setting (the
    variable is restored afterwards)."""
    before = os.environ.get("SPORA_CONV_POOL_FUSION")
    os.environ["SPORA_CONV_POOL_FUSION"] = setting
    try:
        g = S.Graph("lenet5_c2")
        x = g.input("x", S.DTYPE_F32, [4, 6, 14, 14])
        wt = g.input("w", S.DTYPE_F32, [16, 6, 5, 5])
        b = g.input("b", S.DTYPE_F32, [16])
        r = g.input("r", S.DTYPE_F32, [4, 16, 5, 5])
        y = g.op("max_pool2d", [g.op("conv2d_act", [x, wt, b], {"activation": "relu"})[0]], POOL)[0]
        g.set_outputs([g.op("sum", [g.op("mul", [y, r])[0]])[0]])
        g = g.grad([x, wt, b])
        g.optimize(1)
    finally:
        if before is None:
            os.environ.pop("SPORA_CONV_POOL_FUSION")
        else:
            os.environ["SPORA_CONV_POOL_FUSION"] = before
    rng = np.random.default_rng(13)
    vals = [rng.standard_normal(s).astype(np.float32) for s in [(4, 6, 14, 14), (16, 6, 5, 5), (16,), (4, 16, 5, 5)]]
    return g.text(), _run(g, cpu, vals, 4)


def test_blocked_activation_in_another_block_than_the_gradient(cpu, monkeypatch):
    """On AVX-512 the backward kernel builds this layer's g in nChw8c (oneDNN
    has only ref for its weight gradient on nChw16c) while a arrives in
    nChw16c: each lane's channel is found across a's blocks. Same results
    bit for bit as the NCHW hand-over; a child's debug log shows the case."""
    monkeypatch.delenv("SPORA_CONV_POOL_FUSION", raising=False)
    text, got = _lenet5_second_layer(cpu, "1")
    assert _kept(text) == 2, text
    plain_text, want = _lenet5_second_layer(cpu, "unblocked")
    assert "blocked_" not in plain_text, plain_text
    for i, (gv, wv) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(gv, wv, err_msg=f"output {i}, blocked vs NCHW hand-over")
    if " avx512f" not in _cpu_flags() or os.environ.get("ONEDNN_MAX_CPU_ISA"):
        return  # the mixed case is AVX-512's; the values above still hold
    env = dict(os.environ, SPORA_LOG_LEVEL="debug")
    proc = subprocess.run([sys.executable, __file__, "--lenet5-layer"], env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "LAYER DONE" in out, out[-3000:]
    assert "g built in nChw8c from a in nChw16c" in out, out[-3000:]


def test_backward_under_avx2():
    """The two backward tests and the blocked hand-over's training steps
    again with oneDNN capped at AVX2, where g is built in nChw8c by the
    8-lane path and the flagged activation is nChw8c (this machine's own ISA
    may be AVX-512, which the tests above then ran)."""
    if " avx2" not in _cpu_flags():
        pytest.skip("this cpu has no AVX2")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", SPORA_LOG_LEVEL="debug")
    env.pop("SPORA_CONV_POOL_FUSION", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", __file__, "-k",
                           "masked_pooling or backward_is_one_op or same_training_steps"], env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and re.search(r"^10 passed", out, re.M), out[-3000:]
    built = [line for line in out.splitlines() if "conv2d_act_pool_grad" in line and "g built in" in line]
    assert built and all("g built in nChw8c" in line and "avx512" not in line for line in built), built
    # The flagged layers read the activation in AVX2's block too.
    assert any("from a in nChw8c" in line for line in built), built
    assert not any("from a in nChw16c" in line for line in built), built


# ---- oneDNN's log of a training step ------------------------------------------------

def _verbose_main():
    """Run in a child process with ONEDNN_VERBOSE=1: one training step of a
    LeNet-like pair of blocks (batch 8), optimised."""
    ctx = S.Context()
    cpu = ctx.device_find("cpu")
    shape = (8, 1, 28, 28)
    g = S.Graph("lenet_blocks")
    x = g.input("x", S.DTYPE_F32, list(shape))
    w1 = g.input("w1", S.DTYPE_F32, [32, 1, 3, 3])
    b1 = g.input("b1", S.DTYPE_F32, [32])
    w2 = g.input("w2", S.DTYPE_F32, [64, 32, 3, 3])
    b2 = g.input("b2", S.DTYPE_F32, [64])
    p1 = g.op("max_pool2d", [g.op("conv2d_act", [x, w1, b1], CONV)[0]], POOL)[0]
    p2 = g.op("max_pool2d", [g.op("conv2d_act", [p1, w2, b2], CONV)[0]], POOL)[0]
    g.set_outputs([g.op("sum", [p2])[0]])
    o = g.grad([w1, b1, w2, b2])
    o.optimize(1)
    rng = np.random.default_rng(0)
    vals = [rng.standard_normal(shape), rng.standard_normal((32, 1, 3, 3)), rng.standard_normal(32),
            rng.standard_normal((64, 32, 3, 3)) * 0.1, rng.standard_normal(64)]
    ts = [H.to_spora(cpu, np.asarray(v, np.float32), "f32") for v in vals]
    o.compile(cpu).run(ts, 5)
    print("STEP DONE", flush=True)


def _exec_lines(out):
    lines = []
    for line in out.splitlines():
        if line.startswith("onednn_verbose,exec,"):
            f = line.split(",")
            lines.append({"prim": f[3], "impl": f[4], "prop": f[5], "mds": f[6], "dims": f[-2]})
    return lines


def _src_dst(mds):
    """(src layout, dst layout) of a verbose memory-descriptor field."""
    fmt = {p.split("_")[0]: p.split(":")[3] for p in mds.split() if p.count(":") >= 4}
    return fmt.get("src"), fmt.get("dst")


def _cpu_flags():
    try:
        return pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _verbose_step(isa, fusion=None):
    """(oneDNN's exec lines of _verbose_main's step, the block layout tag
    expected) at `isa` ("native" or "AVX2"), SPORA_CONV_POOL_FUSION=fusion."""
    flags = _cpu_flags()
    if isa == "AVX2" and " avx2" not in flags:
        pytest.skip("this cpu has no AVX2")
    env = dict(os.environ, ONEDNN_VERBOSE="1", SPORA_NUM_THREADS="1")
    env.pop("SPORA_CONV_POOL_FUSION", None)
    if fusion is not None:
        env["SPORA_CONV_POOL_FUSION"] = fusion
    env.pop("ONEDNN_MAX_CPU_ISA", None)  # "native": the cpu's own ISA
    if isa == "AVX2":
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
        block = "aBcd8b"
    elif " avx512f" in flags:
        block = "aBcd16b"
    elif " avx2" in flags:
        block = "aBcd8b"
    else:
        pytest.skip("neither AVX-512 nor AVX2: oneDNN has no blocked jit convolution here")
    proc = subprocess.run([sys.executable, __file__, "--verbose-step"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "STEP DONE" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _exec_lines(proc.stdout), block


# The activations of _verbose_main's two layers, as oneDNN prints dims.
_ACTIVATIONS = ("8x32x28x28", "8x64x14x14")


def _blocked_activation_reorders(lines, block):
    return [l for l in lines if l["prim"] == "reorder" and l["dims"] in _ACTIVATIONS
            and _src_dst(l["mds"]) == ("abcd", block)]


@pytest.mark.parametrize("isa", ["native", "AVX2"])
def test_backward_convolutions_share_one_blocked_gradient(isa):
    """With the backward fused, both backward convolutions of a layer read
    the gradient in the block layout, and no activation-sized tensor is
    reordered into blocks (unfused: each convolution gradient reordered its
    NCHW gradient, which the =forward run shows, so the check can fail)."""
    lines, block = _verbose_step(isa)
    bwd = [l for l in lines if l["prim"] == "convolution" and l["prop"].startswith("backward")]
    assert sorted(l["prop"] for l in bwd) == ["backward_data", "backward_weights", "backward_weights"], \
        json.dumps(lines, indent=1)
    for l in bwd:
        fmt = {p.split("_")[0]: p.split(":")[3] for p in l["mds"].split() if p.count(":") >= 4}
        assert fmt.get("dst") == block and "jit" in l["impl"], l  # dst: the gradient read (diff_dst)
    assert not _blocked_activation_reorders(lines, block), _blocked_activation_reorders(lines, block)
    unfused, _ = _verbose_step(isa, "forward")
    assert len(_blocked_activation_reorders(unfused, block)) >= 2, json.dumps(unfused, indent=1)


@pytest.mark.parametrize("isa", ["native", "AVX2"])
def test_pooling_reads_the_convolutions_blocked_layout(isa):
    lines, block = _verbose_step(isa)
    pools = [i for i, l in enumerate(lines) if l["prim"].startswith("pooling")]
    assert len(pools) == 2, json.dumps(lines, indent=1)
    for i in pools:
        conv = lines[i - 1]
        assert conv["prim"] == "convolution" and conv["prop"] == "forward_inference", \
            f"the pooling does not follow its convolution directly (a reorder between?): {lines[i - 1]} {lines[i]}"
        c_src, c_dst = _src_dst(conv["mds"])
        p_src, p_dst = _src_dst(lines[i]["mds"])
        assert c_dst == block and p_src == block and p_dst == block, (conv, lines[i])
        assert "jit" in conv["impl"] and "jit" in lines[i]["impl"], (conv, lines[i])
    slow = [l for l in lines if l["prim"].startswith(("pooling", "batch_normalization"))
            and ("simple" in l["impl"] or "ref" in l["impl"])]
    assert not slow, slow



@pytest.mark.parametrize("isa", ["native", "AVX2"])
def test_flagged_forward_writes_no_nchw_activation(isa):
    """_verbose_main's layers have 32 and 64 channels: flagged. No
    activation-sized tensor is reordered out of blocks into NCHW (abcd); with
    SPORA_CONV_POOL_FUSION=unblocked the forward reorders both kept
    activations so, which shows the check can fail."""
    def to_nchw(lines, block):
        return [l for l in lines if l["prim"] == "reorder" and l["dims"] in _ACTIVATIONS
                and _src_dst(l["mds"]) == (block, "abcd")]
    lines, block = _verbose_step(isa)
    assert not to_nchw(lines, block), to_nchw(lines, block)
    assert len([l for l in lines if l["prim"].startswith("pooling")]) == 2, json.dumps(lines, indent=1)
    plain, _ = _verbose_step(isa, "unblocked")
    assert len(to_nchw(plain, block)) == 2, json.dumps(plain, indent=1)


if __name__ == "__main__" and sys.argv[1:] == ["--verbose-step"]:
    _verbose_main()
if __name__ == "__main__" and sys.argv[1:] == ["--lenet5-layer"]:
    _lenet5_second_layer(S.Context().device_find("cpu"), "1")
    print("LAYER DONE", flush=True)
