"""blocked_handoff and the cpu plugin's conv2d_act_pool / conv2d_act_pool_grad
kernels (issue 19 line 1, chains): between consecutive layers of a CNN --
a pooled result read by the next layer's forward and backward ops, an input
gradient read by the previous layer's backward op -- values stay in the
plugin's blocked layout (nChw16c on AVX-512, nChw8c on AVX2), so a chain
reorders only at its ends.

- The pass marks exactly those values (blocked_outputs on the producer,
  blocked_inputs on every reader), and none that is a graph output, has
  another reader, has channels that do not fill blocks of 16, or is in a
  forward-only graph's last layer.
- Training steps of two- and three-layer chains are bit for bit the same
  with and without the hand-overs (SPORA_CONV_POOL_FUSION=unchained), at
  the machine's ISA and under ONEDNN_MAX_CPU_ISA=AVX2, and match the
  unfused graph to the convolutions' rounding; a layer whose gradient is
  built in nChw8c reads its dy from nChw16c on AVX-512.
- oneDNN's verbose log of a step shows no reorder of a pooled result or of
  an input gradient between the layers; the =unchained step has them (so
  the check can fail).
- A flagged graph runs on sim (decompositions, which ignore the flags);
  ir::verify refuses a graph whose producer and reader disagree; the
  gradient of a flagged graph is refused with what to do instead.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness as H  # noqa: E402
import spora_capi as S  # noqa: E402
import test_cpu_conv_pool as P  # noqa: E402  (the graphs and the verbose-log helpers)

CONV, POOL = P.CONV, P.POOL


@pytest.fixture(scope="module")
def cpu():
    c = S.Context()
    yield c.device_find("cpu")
    c.free()


def _chain(shape, channels, grad=True, extra=None):
    """conv(c)+relu+pool per entry of `channels`, then sum(y * r); with
    `grad`, the loss and its gradients with respect to every weight and
    bias. extra: "output" makes the first pooled result a graph output too,
    "reader" adds sum(p1 * p1) to the loss."""
    n, c, h, w = shape
    g = S.Graph("chain")
    x = g.input("x", S.DTYPE_F32, list(shape))
    params, y, cin = [], x, c
    for i, co in enumerate(channels):
        wt = g.input(f"w{i}", S.DTYPE_F32, [co, cin, 3, 3])
        b = g.input(f"b{i}", S.DTYPE_F32, [co])
        params += [wt, b]
        y = g.op("max_pool2d", [g.op("conv2d_act", [y, wt, b], CONV)[0]], POOL)[0]
        if i == 0:
            p1 = y
        cin = co
    scale = 2 ** len(channels)
    r = g.input("r", S.DTYPE_F32, [n, cin, h // scale, w // scale])
    loss = g.op("sum", [g.op("mul", [y, r])[0]])[0]
    if extra == "reader":
        loss = g.op("add", [loss, g.op("sum", [g.op("mul", [p1, p1])[0]])[0]])[0]
    g.set_outputs([loss, p1] if extra == "output" else [loss])
    if grad:
        return g.grad(params)
    g.x = x  # node 0: optimising keeps it (the weights' nodes may move)
    return g


def _values(shape, channels, rng):
    n, c, h, w = shape
    vals, cin = [rng.standard_normal(shape).astype(np.float32)], c
    for co in channels:
        vals += [(rng.standard_normal((co, cin, 3, 3)) / np.sqrt(9 * cin)).astype(np.float32),
                 (rng.standard_normal(co) * 0.1).astype(np.float32)]
        cin = co
    scale = 2 ** len(channels)
    vals.append(rng.standard_normal((n, cin, h // scale, w // scale)).astype(np.float32))
    return vals


def _optimized(g, setting=None):
    """g optimised at O1 with SPORA_CONV_POOL_FUSION=setting (None: unset),
    the variable restored afterwards."""
    before = os.environ.pop("SPORA_CONV_POOL_FUSION", None)
    if setting is not None:
        os.environ["SPORA_CONV_POOL_FUSION"] = setting
    try:
        o = S.Graph.from_json(g.json())
        o.optimize(1)
    finally:
        os.environ.pop("SPORA_CONV_POOL_FUSION", None)
        if before is not None:
            os.environ["SPORA_CONV_POOL_FUSION"] = before
    return o


def _sgd(cpu, g, vals, steps=3):
    """Losses and parameters after `steps` SGD steps (lr 0.01) of the
    training graph g; vals: x, the parameters, r."""
    exe = g.compile(cpu)
    x, params, r = vals[0], list(vals[1:-1]), vals[-1]
    n_out = 1 + len(params)
    losses = []
    for _ in range(steps):
        out = [t.numpy() for t in exe.run([H.to_spora(cpu, v, "f32") for v in [x, *params, r]], n_out)]
        losses.append(out[0])
        params = [(p - np.float32(0.01) * d).astype(np.float32) for p, d in zip(params, out[1:])]
    return losses + params


def _ports(text):
    """(op, blocked inputs, blocked outputs) of each conv op of an IR text, in
    order, without the kept activation's ports (forward output 1, backward
    input 2: test_cpu_conv_pool.py's), as strings like "[0, 3]"."""
    found = []
    for line in text.splitlines():
        if "conv2d_act_pool" not in line:
            continue
        grad = "conv2d_act_pool_grad(" in line
        lists = []
        for name, kept in (("blocked_inputs", 2 if grad else None), ("blocked_outputs", None if grad else 1)):
            m = re.search(name + r"=\[([0-9, ]*)\]", line)
            ports = [int(v) for v in m.group(1).split(",")] if m else []
            lists.append("[" + ", ".join(str(v) for v in ports if v != kept) + "]")
        found.append(("grad" if grad else "fwd", *lists))
    return found


def _chained(text):
    """Whether any value between layers is handed over blocked."""
    return any(ins != "[]" or outs != "[]" for _, ins, outs in _ports(text))


def test_two_layers_hand_over_the_pooled_result_and_the_input_gradient():
    text = _optimized(_chain((2, 1, 16, 16), [16, 32])).text()
    assert _ports(text) == [("fwd", "[]", "[0]"), ("fwd", "[0]", "[]"),
                            ("grad", "[0]", "[2]"), ("grad", "[3]", "[]")], text


def test_three_layers_middle_layer_reads_and_writes_blocked():
    text = _optimized(_chain((2, 1, 16, 16), [16, 16, 32])).text()
    assert _ports(text) == [("fwd", "[]", "[0]"), ("fwd", "[0]", "[0]"), ("fwd", "[0]", "[]"),
                            ("grad", "[0]", "[2]"), ("grad", "[0, 3]", "[2]"), ("grad", "[3]", "[]")], text


@pytest.mark.parametrize("case", ["output", "reader", "8-channels", "unchained"])
def test_no_hand_over_where_another_reader_or_shape_needs_nchw(case):
    """The first pooled result stays NCHW when it is also a graph output,
    has another reader, has 8 channels (not whole blocks of 16), or the
    hand-overs are switched off; the control without the obstacle hands it
    over, so the test can fail both ways."""
    channels = [8, 32] if case == "8-channels" else [16, 32]
    g = _chain((2, 1, 16, 16), channels, extra=case if case in ("output", "reader") else None)
    text = _optimized(g, "unchained" if case == "unchained" else None).text()
    forward = [p for p in _ports(text) if p[0] == "fwd"]
    assert forward == [("fwd", "[]", "[]"), ("fwd", "[]", "[]")], text
    control = _ports(_optimized(_chain((2, 1, 16, 16), [16, 32])).text())
    assert control[0] == ("fwd", "[]", "[0]"), control


def test_forward_only_chain_hands_over_too():
    """Inference: the pooled result's only reader is the next layer's
    forward op, so it is handed over (the last layer's result goes to NCHW
    for the loss)."""
    text = _optimized(_chain((2, 1, 16, 16), [16, 32], grad=False)).text()
    assert _ports(text) == [("fwd", "[]", "[0]"), ("fwd", "[0]", "[]")], text


@pytest.mark.parametrize("channels,shape", [([16, 32], (4, 1, 16, 16)), ([16, 16, 32], (3, 2, 24, 16)),
                                            ([32, 64], (8, 1, 28, 28))],
                         ids=["two-layers", "three-layers", "main-lenet"])
def test_hand_overs_give_the_same_training_steps(cpu, channels, shape):
    """Three SGD steps with the hand-overs, without them (=unchained: the
    kept activation still blocked) and unfused: bit for bit the same for the
    first two (the same primitives read the same values; only where they
    are stored changes), within the convolutions' rounding of the third."""
    g = _chain(shape, channels)
    vals = _values(shape, channels, np.random.default_rng(21))
    chained, plain, unfused = (_optimized(g, s) for s in (None, "unchained", "0"))
    assert "blocked_outputs=[0, 1]" in chained.text() and "blocked_outputs=[1]" in plain.text(), plain.text()
    assert _chained(chained.text()) and not _chained(plain.text()), plain.text()
    got, want, ref = (_sgd(cpu, o, vals) for o in (chained, plain, unfused))
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"value {i}, blocked vs NCHW hand-over")
    for i, (a, b) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4, err_msg=f"value {i}, vs unfused")


def _mixed_block_chain(cpu, setting):
    """LeNet-5's second layer (6 -> 16, 5x5) then a 16 -> 32 layer: on
    AVX-512 the first builds its gradient in nChw8c (oneDNN has only ref for
    its weight gradient on nChw16c) while its dy arrives in nChw16c."""
    g = S.Graph("mixed")
    x = g.input("x", S.DTYPE_F32, [4, 6, 20, 20])
    w1, b1 = g.input("w1", S.DTYPE_F32, [16, 6, 5, 5]), g.input("b1", S.DTYPE_F32, [16])
    w2, b2 = g.input("w2", S.DTYPE_F32, [32, 16, 3, 3]), g.input("b2", S.DTYPE_F32, [32])
    r = g.input("r", S.DTYPE_F32, [4, 32, 4, 4])
    p1 = g.op("max_pool2d", [g.op("conv2d_act", [x, w1, b1], {"activation": "relu"})[0]], POOL)[0]
    p2 = g.op("max_pool2d", [g.op("conv2d_act", [p1, w2, b2], CONV)[0]], POOL)[0]
    g.set_outputs([g.op("sum", [g.op("mul", [p2, r])[0]])[0]])
    o = _optimized(g.grad([w1, b1, w2, b2]), setting)
    rng = np.random.default_rng(22)
    vals = [rng.standard_normal(s).astype(np.float32) * 0.5
            for s in [(4, 6, 20, 20), (16, 6, 5, 5), (16,), (32, 16, 3, 3), (32,), (4, 32, 4, 4)]]
    return o.text(), _sgd(cpu, o, vals, steps=2)


def test_dy_read_from_another_block_than_the_gradient(cpu):
    text, got = _mixed_block_chain(cpu, None)
    assert ("grad", "[3]", "[]") in _ports(text), text
    plain_text, want = _mixed_block_chain(cpu, "unchained")
    assert not _chained(plain_text), plain_text
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"value {i}, blocked vs NCHW dy")
    if " avx512f" not in P._cpu_flags() or os.environ.get("ONEDNN_MAX_CPU_ISA"):
        return  # the mixed case is AVX-512's; the values above still hold
    env = dict(os.environ, SPORA_LOG_LEVEL="debug")
    proc = subprocess.run([sys.executable, __file__, "--mixed"], env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "MIXED DONE" in out, out[-3000:]
    assert any("g built in nChw8c" in line and "dy handed in blocked" in line for line in out.splitlines()), \
        out[-3000:]


def test_flagged_chain_on_sim_runs_the_decompositions(cpu):
    """Graphs are optimised for the host target, so sim can get one with
    hand-overs: it decomposes both ops, which ignore the flags, and agrees
    with the unoptimised graph on the cpu."""
    shape, channels = (2, 1, 16, 16), [16, 32]
    g = _chain(shape, channels)
    o = _optimized(g)
    assert "blocked_outputs" in o.text(), o.text()
    vals = _values(shape, channels, np.random.default_rng(23))
    ts = lambda dev: [H.to_spora(dev, v, "f32") for v in vals]  # noqa: E731
    want = [t.numpy() for t in g.compile(cpu).run(ts(cpu), 5)]
    sim = S.Context().device_find("sim")
    for dev in (sim, cpu):
        got = [t.numpy() for t in o.compile(dev).run(ts(dev), 5)]
        for i, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4, err_msg=f"{dev} output {i}")


def test_verify_refuses_a_reader_that_disagrees():
    """A graph whose producer writes a value blocked and whose reader reads
    it as NCHW (what a pass adding a reader after blocked_handoff would
    leave) is refused when loaded, naming the node and the input."""
    o = _optimized(_chain((2, 1, 16, 16), [16, 32]))
    doc = json.loads(o.json())
    text = json.dumps(doc)
    assert '"blocked_inputs"' in text, text[:2000]

    def strip(node):
        if isinstance(node, dict):
            attrs = node.get("attrs")
            if isinstance(attrs, dict) and "blocked_inputs" in attrs and "blocked_outputs" not in attrs:
                del attrs["blocked_inputs"]
                return True
            return any(strip(v) for v in node.values())
        if isinstance(node, list):
            return any(strip(v) for v in node)
        return False

    assert strip(doc), "no reader with blocked_inputs alone found"
    with pytest.raises(S.SporaError) as e:
        S.Graph.from_json(json.dumps(doc))
    assert "read as NCHW but its producer writes it blocked" in str(e.value), str(e.value)


def test_gradient_of_a_flagged_graph_is_refused():
    """The gradient rules would read blocked bytes as NCHW: differentiating
    an optimised graph with hand-overs fails and says what to do."""
    g = _chain((2, 1, 16, 16), [16, 32], grad=False)
    g.optimize(1)  # in place: the inputs keep their values
    assert "blocked_outputs" in g.text(), g.text()
    with pytest.raises(S.SporaError) as e:
        g.grad([g.x])
    assert "differentiate before optimising" in str(e.value), str(e.value)


def test_mixed_precision_drops_the_hand_overs(cpu):
    """AMP (run on request after the pipeline) converts the ops to bf16,
    which the kernels do not take blocked: it drops every list, and the
    step runs (a kept list would fail the bf16 plan) close to f32's."""
    shape, channels = (2, 1, 16, 16), [16, 32]
    g = _chain(shape, channels)
    o = _optimized(g)
    assert "blocked_outputs" in o.text(), o.text()
    o.run_pass("mixed_precision")
    assert "blocked_inputs" not in o.text() and "blocked_outputs" not in o.text(), o.text()
    assert "bf16" in o.text(), o.text()
    vals = _values(shape, channels, np.random.default_rng(24))
    ts = [H.to_spora(cpu, v, "f32") for v in vals]
    got = [t.numpy() for t in o.compile(cpu).run(ts, 5)]
    want = [t.numpy() for t in g.compile(cpu).run(ts, 5)]
    for i, (a, b) in enumerate(zip(got, want)):
        err = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)
        assert np.isfinite(a).all() and err < 0.1, f"output {i}: relative error {err:.3g} vs f32"


def test_chain_under_avx2():
    """The training-step and mixed-block tests again with oneDNN capped at
    AVX2 (nChw8c hand-overs); the debug log shows them."""
    if " avx2" not in P._cpu_flags():
        pytest.skip("this cpu has no AVX2")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", SPORA_LOG_LEVEL="debug")
    env.pop("SPORA_CONV_POOL_FUSION", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", __file__, "-k",
                           "same_training_steps or another_block"], env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "4 passed" in out, out[-3000:]
    handed = [line for line in out.splitlines() if "handed" in line]
    assert any("dx handed on blocked" in line for line in handed), out[-3000:]
    assert not any("avx512" in line for line in handed), handed


# ---- oneDNN's log: no reorder between the layers ---------------------------------

def _verbose_main():
    """Child with ONEDNN_VERBOSE=1: one training step of the main job's two
    blocks (batch 8), optimised with the caller's SPORA_CONV_POOL_FUSION."""
    cpu = S.Context().device_find("cpu")
    shape, channels = (8, 1, 28, 28), [32, 64]
    g = _chain(shape, channels)
    g.optimize(1)
    vals = _values(shape, channels, np.random.default_rng(0))
    g.compile(cpu).run([H.to_spora(cpu, v, "f32") for v in vals], 5)
    print("STEP DONE", flush=True)


def _between_layers(isa, fusion):
    """Reorders of the values between the layers (the first pooled result
    and its gradient, 8x32x14x14) in a step's verbose log."""
    flags = P._cpu_flags()
    if isa == "AVX2" and " avx2" not in flags:
        pytest.skip("this cpu has no AVX2")
    if " avx2" not in flags:
        pytest.skip("no blocked jit convolution on this cpu")
    env = dict(os.environ, ONEDNN_VERBOSE="1", SPORA_NUM_THREADS="1")
    env.pop("SPORA_CONV_POOL_FUSION", None)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    if fusion is not None:
        env["SPORA_CONV_POOL_FUSION"] = fusion
    if isa == "AVX2":
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    proc = subprocess.run([sys.executable, __file__, "--verbose-step"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "STEP DONE" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = P._exec_lines(proc.stdout)
    assert any(line["prim"].startswith("convolution") for line in lines), proc.stdout[-3000:]
    return [line for line in lines if line["prim"] == "reorder" and line["dims"] == "8x32x14x14"]


@pytest.mark.parametrize("isa", ["native", "AVX2"])
def test_no_reorder_between_the_layers(isa):
    assert _between_layers(isa, None) == []
    # =unchained: the pooled result out to NCHW and into blocks twice (the
    # next forward and backward convolutions), the input gradient out.
    assert len(_between_layers(isa, "unchained")) >= 3


if __name__ == "__main__" and sys.argv[1:] == ["--verbose-step"]:
    _verbose_main()
if __name__ == "__main__" and sys.argv[1:] == ["--mixed"]:
    _mixed_block_chain(S.Context().device_find("cpu"), None)
    print("MIXED DONE", flush=True)
