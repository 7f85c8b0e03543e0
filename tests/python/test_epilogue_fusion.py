"""Epilogue fusion end to end through the C API's graph functions: graphs
optimised at level 1 (linear/conv2d_bias + activation / residual add ->
linear_act, linear_add_act, conv2d_act, conv2d_add_act) give the numbers of
the unoptimised graph on every device: bit-identical on sim (reference
kernels, composed of the unfused ones), within rounding of the activation on
cpu (oneDNN post-ops). Training graphs (forward + gradients) included."""
import os
import subprocess
import sys

import numpy as np
import pytest

import spora_capi as S


@pytest.fixture(scope="module")
def ctx():
    c = S.Context()
    yield c


def _mlp(dtype=S.DTYPE_F32, train=True):
    """x -> linear+relu -> linear + residual -> tanh -> linear+sigmoid ->
    linear+gelu(tanh) -> sum of squares; with gradients w.r.t. every weight."""
    g = S.Graph("mlp")
    x = g.input("x", dtype, [8, 12])
    ws = []

    def dense(h, n_in, n_out, i):
        w = g.weight(f"w{i}", dtype, [n_out, n_in])
        b = g.weight(f"b{i}", dtype, [n_out])
        ws.extend([w, b])
        return g.op("linear", [h, w, b], file="model.py", line=10 + i)[0]

    h1 = g.op("relu", [dense(x, 12, 16, 0)])[0]
    h2 = g.op("tanh", [g.op("add", [dense(h1, 16, 16, 1), h1])[0]])[0]
    h3 = g.op("sigmoid", [dense(h2, 16, 16, 2)])[0]
    h4 = g.op("gelu", [dense(h3, 16, 4, 3)], {"approximate": "tanh"})[0]
    loss = g.op("sum", [g.op("mul", [h4, h4])[0]])[0]
    g.set_outputs([loss])
    return (g.grad(ws) if train else g), 1 + (len(ws) if train else 0)


def _resnet_block(train=True):
    """conv+bias -> relu -> conv+bias + shortcut -> relu (ResNet's basic
    block) -> mean, with gradients."""
    g = S.Graph("block")
    x = g.input("x", S.DTYPE_F32, [2, 8, 10, 10])
    ws = []
    h = x
    for i in range(2):
        w = g.weight(f"c{i}", S.DTYPE_F32, [8, 8, 3, 3])
        b = g.weight(f"c{i}b", S.DTYPE_F32, [8])
        ws.extend([w, b])
        h = g.op("conv2d_bias", [h, w, b], {"padding": [1, 1]})[0]
        if i == 0:
            h = g.op("relu", [h])[0]
    y = g.op("relu", [g.op("add", [h, x])[0]])[0]
    loss = g.op("mean", [g.op("mul", [y, y])[0]])[0]
    g.set_outputs([loss])
    return (g.grad(ws) if train else g), 1 + (len(ws) if train else 0)


def _bf16_bits(a):
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_tensor(dev, bits):
    bits = np.ascontiguousarray(bits)
    return S.Tensor.create_raw(dev, S.DTYPE_BF16, bits.shape, bits, bits.nbytes)


def _bf16_read(t):
    bits = np.empty(t.shape, np.uint16)
    S.call("spora_tensor_read", t.handle, bits.ctypes.data_as(S._vp), bits.nbytes)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _params(g, dev, rng, np_dtype=np.float32):
    shapes = []
    for v in g.params:
        _, shape = g.value_type(v)
        shapes.append(shape)
    arrays = [(rng.standard_normal(s) * (0.3 if len(s) > 1 else 0.1)).astype(np_dtype) for s in shapes]
    return arrays


def _run(g, dev, arrays, n_out):
    exe = g.compile(dev)
    return [t.numpy() for t in exe.run([S.Tensor.from_numpy(dev, a) for a in arrays], n_out)]


def _compare(build, ctx, fused_ops):
    rng = np.random.default_rng(0)
    plain, n_out = build()
    opt, _ = build()
    opt.optimize(1)
    text = opt.text()
    for op in fused_ops:
        assert op in text, f"{op} missing after optimize(1):\n{text}"
    arrays = _params(plain, None, rng)
    for dev in ctx.devices():
        want = _run(plain, dev, arrays, n_out)
        got = _run(opt, dev, arrays, n_out)
        for i, (a, b) in enumerate(zip(got, want)):
            if dev.name.startswith("sim"):
                np.testing.assert_array_equal(a, b, err_msg=f"output {i} on sim")
            else:
                np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"output {i} on {dev.name}")


def test_mlp_training_graph_fuses_and_matches_unfused(ctx):
    # gelu's gradient reads the pre-activation, so that layer stays unfused
    # in a training graph; the others fuse (relu's mask reads the output).
    _compare(lambda: _mlp(), ctx, ["linear_act", "linear_add_act"])
    g, _ = _mlp()
    g.optimize(1)
    text = g.text()
    assert text.count("linear_act(") == 2 and text.count("linear_add_act(") == 1, text
    # (tanh still appears: gelu_tanh's gradient uses it)
    assert "= relu(" not in text and "= sigmoid(" not in text, text


def test_mlp_inference_graph_fuses_every_layer(ctx):
    _compare(lambda: _mlp(train=False), ctx, ["linear_act", "linear_add_act"])
    g, _ = _mlp(train=False)
    g.optimize(1)
    assert " linear(" not in g.text(), g.text()
    assert 'activation="gelu_tanh"' in g.text()


def test_resnet_block_training_graph(ctx):
    _compare(lambda: _resnet_block(), ctx, ["conv2d_act", "conv2d_add_act"])


def test_resnet_block_inference(ctx):
    _compare(lambda: _resnet_block(train=False), ctx, ["conv2d_act", "conv2d_add_act"])


def test_bf16_graph_fuses_and_stays_close(ctx):
    # One rounding instead of one per op: close to the unfused bf16 graph.
    g0, n = _mlp(S.DTYPE_BF16, train=False)
    g1, _ = _mlp(S.DTYPE_BF16, train=False)
    g1.optimize(1)
    assert "linear_act" in g1.text()
    rng = np.random.default_rng(1)
    arrays = [_bf16_bits(a) for a in _params(g0, None, rng)]
    for dev in ctx.devices():
        want = [_bf16_read(t) for t in g0.compile(dev).run([_bf16_tensor(dev, a) for a in arrays], n)]
        got = [_bf16_read(t) for t in g1.compile(dev).run([_bf16_tensor(dev, a) for a in arrays], n)]
        np.testing.assert_allclose(got[0], want[0], rtol=3e-2, atol=2e-2)


@pytest.mark.parametrize("op,shapes,attrs", [
    ("linear_act", [(4, 6), (5, 6), (5,)], {"activation": "relu"}),
    ("linear_add_act", [(2, 3, 6), (5, 6), (5,), (2, 3, 5)], {"activation": "sigmoid"}),
    ("conv2d_act", [(1, 3, 6, 6), (4, 3, 3, 3), (4,)], {"activation": "gelu", "padding": [1, 1]}),
    ("conv2d_add_act", [(1, 3, 6, 6), (4, 3, 3, 3), (4,), (1, 4, 4, 4)], {"activation": "tanh"}),
])
def test_devices_without_a_kernel_run_the_decomposition(op, shapes, attrs):
    # A fresh process: the sim plugin reads SPORA_SIM_DISABLE_OPS when loaded.
    code = f"""
import numpy as np, sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import spora_capi as S
ctx = S.Context()
cpu, sim = ctx.device_find("cpu"), ctx.device_find("sim")
rng = np.random.default_rng(2)
arrays = [rng.standard_normal(s).astype(np.float32) for s in {shapes!r}]
def run(dev):
    return S.op_call({op!r}, [S.Tensor.from_numpy(dev, a) for a in arrays], {attrs!r})[0].numpy()
np.testing.assert_allclose(run(sim), run(cpu), rtol=1e-5, atol=1e-6)
print("ok")
"""
    env = dict(os.environ, SPORA_SIM_DISABLE_OPS=op)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_second_order_through_the_fused_rule(ctx):
    # grad of grad of a fused op (f64): the rule is built from ops with rules.
    cpu = ctx.device_find("cpu")
    g = S.Graph("g2")
    x = g.input("x", S.DTYPE_F64, [3, 4])
    w = g.input("w", S.DTYPE_F64, [2, 4])
    b = g.input("b", S.DTYPE_F64, [2])
    y = g.op("linear_act", [x, w, b], {"activation": "tanh"})[0]
    g.set_outputs([g.op("sum", [g.op("mul", [y, y])[0]])[0]])
    g1 = g.grad([x])
    g1.set_outputs([g1.op("sum", [g1.outputs()[1]])[0]])
    g2 = g1.grad([w])
    rng = np.random.default_rng(4)
    vals = [rng.standard_normal(s) for s in [(3, 4), (2, 4), (2,)]]

    def f(v):
        return g1.compile(cpu).run([S.Tensor.from_numpy(cpu, a) for a in v], 1)[0].numpy()

    an = g2.compile(cpu).run([S.Tensor.from_numpy(cpu, a) for a in vals], 2)[1].numpy()
    eps = 1e-6
    for idx in [(0, 0), (1, 3)]:
        p = [a.copy() for a in vals]
        m = [a.copy() for a in vals]
        p[1][idx] += eps
        m[1][idx] -= eps
        fd = (f(p) - f(m)) / (2 * eps)
        assert abs(fd - an[idx]) <= 1e-5 * max(1, abs(fd)), (idx, fd, an[idx])
