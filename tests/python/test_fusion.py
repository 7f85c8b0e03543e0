"""Elementwise fusion end to end: graphs optimized at level 2 (where the
elementwise_fusion pass runs) give the numbers of the same graphs unoptimized,
compiled and eager, on cpu and sim; fused_elementwise runs as its
decomposition on a device without a kernel for it."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spora_capi as S


@pytest.fixture(scope="module")
def ctx():
    c = S.Context()
    yield c


def _copy(g):
    h = S.Graph.from_json(g.json())
    h.params = list(g.params)
    return h


def _run(g, dev, arrays, n_out):
    ts = [S.Tensor.from_numpy(dev, a) for a in arrays]
    return [t.numpy() for t in g.compile(dev).run(ts, n_out)]


def _count(g, op):
    return g.text().count(f"= {op}(")


def _training_step(rng, dev, dt, npdt):
    """An MLP step (forward, cross-entropy, gradients, SGD-momentum update)
    with elementwise chains in the forward pass; returns (graph, inputs)."""
    B, I, H, O = 16, 20, 32, 10
    g = S.Graph("step")
    x = g.input("x", dt, [B, I])
    labels = g.input("labels", S.DTYPE_I64, [B])
    ws = []
    arrays = [rng.standard_normal((B, I)).astype(npdt), rng.integers(0, O, B).astype(np.int64)]
    for name, shape in [("w0", [H, I]), ("b0", [H]), ("w1", [O, H]), ("b1", [O])]:
        ws.append(g.weight(name, dt, shape))
        arrays.append((0.3 * rng.standard_normal(shape)).astype(npdt))
    half = g.constant(S.Tensor.from_numpy(dev, np.array(0.5, npdt)))
    a = g.op("linear", [x, ws[0], ws[1]])[0]
    # tanh(a) * 0.5 + relu(a): a is read twice, so no epilogue fusion.
    h = g.op("add", [g.op("mul", [g.op("tanh", [a])[0], half])[0], g.op("relu", [a])[0]])[0]
    logits = g.op("linear", [h, ws[2], ws[3]])[0]
    g.set_outputs([g.op("cross_entropy", [logits, labels])[0]])
    gg = g.grad(ws)
    outs = gg.outputs()
    lr = gg.constant(S.Tensor.from_numpy(dev, np.array(0.05, npdt)))
    mu = gg.constant(S.Tensor.from_numpy(dev, np.array(0.9, npdt)))
    new_w, new_m = [], []
    for i, w in enumerate(ws):
        shape = list(arrays[2 + i].shape)
        m = gg.weight(f"m{i}", dt, shape)
        arrays.append((0.1 * rng.standard_normal(shape)).astype(npdt))
        v = gg.op("add", [gg.op("mul", [m, mu])[0], outs[1 + i]])[0]
        new_w.append(gg.op("sub", [w, gg.op("mul", [v, lr])[0]])[0])
        new_m.append(v)
    gg.set_outputs([outs[0]] + new_w + new_m)
    return gg, arrays



def test_training_step_fused_matches_unfused(ctx):
    # f64, so the fused and unfused steps can be compared to 1e-10. The f32
    # kernels are compared with unfused ops by test_chain_fused_matches_unfused.
    cpu = ctx.device_find("cpu")
    rng = np.random.default_rng(0)
    rtol, atol = 1e-10, 1e-12
    g, arrays = _training_step(rng, cpu, S.DTYPE_F64, np.float64)
    n_out = len(g.outputs())
    o1, o2 = _copy(g), _copy(g)
    o1.optimize(1)
    o2.optimize(2)
    assert _count(o1, "fused_elementwise") == 0
    fused = _count(o2, "fused_elementwise")
    assert fused >= 6, o2.text()  # forward chain, its backward, 4 + 4 update chains
    # tanh stays: its output is also read by its gradient rule (a second
    # reader outside the group); relu's mask and where fuse into the backward.
    assert _count(o2, "tanh") == 1
    assert _count(o2, "relu") == 0, o2.text()
    assert "greater; t0 in1 c:0 where" in o2.text(), o2.text()  # relu's backward
    want = _run(g, cpu, arrays, n_out)
    for dev_name in ("cpu", "sim"):
        dev = ctx.device_find(dev_name)
        for opt in (o1, o2, _copy(o2)):  # the copy: fused nodes through JSON
            got = _run(opt, dev, arrays, n_out)
            for i, (a, b) in enumerate(zip(got, want)):
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i} on {dev_name}")
        # Eager execution of the fused graph: fused_elementwise dispatched as one op.
        ts = [S.Tensor.from_numpy(dev, a) for a in arrays]
        got = [t.numpy() for t in o2.run_eager(dev, ts, n_out)]
        for i, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"eager output {i} on {dev_name}")


def _chain_graph(dtype, shape, row_shape):
    """sigmoid(x) * x + 1, then * where(x > 0, row, -row), exp with overflow."""
    g = S.Graph("chain")
    x = g.input("x", dtype, list(shape))
    row = g.input("row", dtype, list(row_shape))
    s = g.op("sigmoid", [x])[0]
    y = g.op("add", [g.op("mul", [s, x])[0], g.op("exp", [g.op("mul", [x, x])[0]])[0]])[0]
    zero = g.op("sub", [row, row])[0]  # a zero of the right dtype without a constant
    pos = g.op("greater", [x, g.op("maximum", [zero, zero])[0]])[0]
    y = g.op("mul", [y, g.op("where", [pos, row, g.op("neg", [row])[0]])[0]])[0]
    g.set_outputs([y])
    return g


@pytest.mark.parametrize("dtype,npdt,tol", [
    (S.DTYPE_F32, np.float32, (2e-6, 1e-30)),
    (S.DTYPE_F64, np.float64, (1e-14, 1e-300)),
    # f16: the fused kernel computes in f32 and rounds once, where the
    # unfused ops round (and overflow) after every op: its reference is the
    # f32 graph on the same values, rounded to f16.
    (S.DTYPE_F16, np.float16, (1e-3, 1e-4)),
])
@pytest.mark.parametrize("shape,row_shape", [((3, 5), (5,)), ((517, 1031), (1031,)), ((), ())])
def test_chain_fused_matches_unfused(ctx, dtype, npdt, tol, shape, row_shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 6).astype(npdt)  # x*x up to ~600: exp overflows to inf
    row = rng.standard_normal(row_shape).astype(npdt)
    g = _chain_graph(dtype, shape, row_shape)
    f = _copy(g)
    f.optimize(2)
    assert _count(f, "fused_elementwise") >= 1, f.text()
    cpu = ctx.device_find("cpu")
    if npdt == np.float16:
        g32 = _chain_graph(S.DTYPE_F32, shape, row_shape)
        want = _run(g32, cpu, [x.astype(np.float32), row.astype(np.float32)], 1)[0]
        with np.errstate(over="ignore"):  # f16 overflows to inf, as the kernel's rounding does
            want = want.astype(np.float16).astype(np.float64)
    else:
        want = _run(g, cpu, [x, row], 1)[0].astype(np.float64)
    for dev_name in ("cpu", "sim"):
        got = _run(f, ctx.device_find(dev_name), [x, row], 1)[0].astype(np.float64)
        assert np.array_equal(np.isinf(got), np.isinf(want)), dev_name
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=dev_name)


def test_fused_op_has_errors_naming_it(ctx):
    cpu = ctx.device_find("cpu")
    x = S.Tensor.from_numpy(cpu, np.ones((2, 3), np.float32))
    with pytest.raises(S.SporaError, match=r"\[fused_elementwise\] instruction 1 \('t0 in0 matmul'\): 'matmul' is not"):
        S.op_call("fused_elementwise", [x], {"program": "in0 exp; t0 in0 matmul"})
    with pytest.raises(S.SporaError, match=r"attribute 'program' \(string\) is required"):
        S.op_call("fused_elementwise", [x])


def test_device_without_the_kernel_runs_the_decomposition():
    """The sim plugin with fused_elementwise disabled: eager calls run its
    decomposition on sim (SPORA_SIM_DISABLE_OPS is read when the plugin
    loads, hence a fresh process)."""
    code = textwrap.dedent("""
        import numpy as np, spora_capi as S
        ctx = S.Context()
        cpu, sim = ctx.device_find("cpu"), ctx.device_find("sim")
        rng = np.random.default_rng(2)
        x = rng.standard_normal((4, 6)).astype(np.float32)
        prog = "in0 sigmoid; t0 in0 mul; t1 c:1 add; t2 c:0 greater; t3 t2 in0 where"
        def run(dev):
            return S.op_call("fused_elementwise", [S.Tensor.from_numpy(dev, x)], {"program": prog})[0]
        want = run(cpu).numpy()
        out = run(sim)
        assert out.device == sim
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-7)
        print("ok")
    """)
    env = dict(os.environ, SPORA_SIM_DISABLE_OPS="fused_elementwise", PYTHONPATH=os.path.dirname(__file__))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
