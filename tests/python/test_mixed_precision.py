"""Mixed precision end to end: a training step's graph optimised at level 2
and then given the mixed_precision pass (by name: no opt level changes
numerics) runs its matrix products and convolutions in bf16 (casts inserted by the
mixed_precision pass) and gives the f32 graph's loss and gradients within
bf16 tolerance on every device; outputs stay f32."""
import re

import numpy as np
import pytest

import spora_capi as S


@pytest.fixture(scope="module")
def ctx():
    c = S.Context()
    yield c


def _finish(g, logits, labels, ws):
    loss = g.op("cross_entropy", [logits, labels])[0]
    g.set_outputs([loss])
    return g.grad(ws), 1 + len(ws)


def _mlp():
    g = S.Graph("mlp")
    # 256-wide layers at batch 128: ~32 flops per byte, converted; the
    # 10-way head is memory-bound and stays f32.
    x = g.input("x", S.DTYPE_F32, [128, 256])
    labels = g.input("labels", S.DTYPE_I64, [128])
    ws, h = [], x
    sizes = [256, 256, 256, 10]
    for i in range(3):
        w = g.weight(f"w{i}", S.DTYPE_F32, [sizes[i + 1], sizes[i]])
        b = g.weight(f"b{i}", S.DTYPE_F32, [sizes[i + 1]])
        ws += [w, b]
        h = g.op("linear", [h, w, b])[0]
        if i < 2:
            h = g.op("relu", [h])[0]
    return _finish(g, h, labels, ws)


def _lenet():
    g = S.Graph("lenet")
    x = g.input("x", S.DTYPE_F32, [8, 1, 28, 28])
    labels = g.input("labels", S.DTYPE_I64, [8])
    ws = []

    def wgt(name, shape):
        v = g.weight(name, S.DTYPE_F32, shape)
        ws.append(v)
        return v

    c1 = g.op("relu", [g.op("conv2d_bias", [x, wgt("c1", [6, 1, 5, 5]), wgt("c1b", [6])], {"padding": [2, 2]})[0]])[0]
    p1 = g.op("max_pool2d", [c1], {"kernel_size": [2, 2]})[0]
    c2 = g.op("relu", [g.op("conv2d_bias", [p1, wgt("c2", [16, 6, 5, 5]), wgt("c2b", [16])])[0]])[0]
    p2 = g.op("max_pool2d", [c2], {"kernel_size": [2, 2]})[0]
    h = g.op("reshape", [p2], {"shape": [8, 400]})[0]
    h = g.op("relu", [g.op("linear", [h, wgt("f1", [120, 400]), wgt("f1b", [120])])[0]])[0]
    h = g.op("linear", [h, wgt("f2", [10, 120]), wgt("f2b", [10])])[0]
    return _finish(g, h, labels, ws)


def _arrays(g, rng):
    out = []
    for v in g.params:
        dt, shape = g.value_type(v)
        if dt == S.DTYPE_I64:
            out.append(rng.integers(0, 10, shape).astype(np.int64))
        else:
            scale = 1.0 if len(out) == 0 else (1.0 / np.sqrt(np.prod(shape[1:])) if len(shape) > 1 else 0.1)
            out.append((rng.standard_normal(shape) * scale).astype(np.float32))
    return out


def _run(g, dev, arrays, n):
    return [t.numpy() for t in g.compile(dev).run([S.Tensor.from_numpy(dev, a) for a in arrays], n)]


@pytest.mark.parametrize("build", [_mlp, _lenet], ids=["mlp", "lenet"])
def test_level2_matches_f32_within_bf16_tolerance(ctx, build):
    g1, n = build()
    g2, _ = build()
    arrays = _arrays(g1, np.random.default_rng(0))  # before optimize renumbers values
    g1.optimize(2)  # level 2 alone keeps f32
    g2.optimize(2)
    g2.run_pass("mixed_precision")
    text = g2.text()
    assert "bf16" in text and "bf16" not in g1.text()
    for dev in ctx.devices():
        want = _run(g1, dev, arrays, n)
        got = _run(g2, dev, arrays, n)
        for i, (a, b) in enumerate(zip(got, want)):
            assert a.dtype == np.float32, f"output {i} is {a.dtype}"
            err = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)
            cos = float(np.dot(a.ravel(), b.ravel()) / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))
            what = f"{build.__name__} output {i} on {dev.name}: relative error {err:.3g}, cosine {cos:.5f}"
            if i == 0:  # the loss
                assert err < 1e-3, what
            else:
                # bf16 keeps 8 significant bits (0.4% per rounding); a gradient
                # that sums many terms which mostly cancel (dW = g^T x over the
                # batch), through layers whose relu masks flip where the
                # pre-activation is within rounding of 0, differs by more: a
                # numpy emulation of these exact steps (operands and products
                # rounded to bf16, f64 elsewhere) gives 5.7% for the MLP's first
                # layer. The direction must still agree closely.
                assert err < 0.15 and cos > 0.99, what


def _ops(text):
    """(id, op, input ids, dtype) of every op line; an input that is output k > 0
    of a node with several outputs (%4.1) is (id, k)."""
    out = []
    for m in re.finditer(r"%(\d+) = (\w+)\(([^)]*)\)[^:]*: (\w+)\[", text):
        ins = [int(v) if not k or k == "0" else (int(v), int(k))
               for v, k in re.findall(r"%(\d+)(?:\.(\d+))?", m.group(3))]
        out.append((int(m.group(1)), m.group(2), ins, m.group(4)))
    return out


@pytest.mark.parametrize("build", [_mlp, _lenet], ids=["mlp", "lenet"])
def test_casts_are_shared_and_never_chained(build):
    g, _ = build()
    g.optimize(2)
    fused_grad = "conv2d_act_pool_grad(" in g.text()
    # LeNet's second layer (16 channels) hands its activation over in blocks.
    blocked = "blocked_inputs=" in g.text()
    g.run_pass("mixed_precision")
    # conv_pool_grad_fusion's op (LeNet's backward) goes back to its parts,
    # whose convolution gradients convert like any others; the parts read
    # the activation as NCHW, so its conv2d_act_pool no longer blocks it.
    assert fused_grad == (build is _lenet) and "conv2d_act_pool_grad" not in g.text()
    assert blocked == (build is _lenet) and "blocked_" not in g.text()
    ops = _ops(g.text())
    by_id = {i: (op, ins, dt) for i, op, ins, dt in ops}
    cast_sources = []
    products = {"f32": 0, "bf16": 0}
    for i, op, ins, dt in ops:
        if op == "cast":
            src = by_id.get(ins[0])
            assert not (src and src[0] == "cast"), f"cast of a cast at %{i}"
            cast_sources.append((ins[0], dt))
        if op in ("matmul", "linear", "linear_act", "conv2d_act", "conv2d_act_pool", "conv2d_grad_input",
                  "conv2d_grad_weight"):
            products[dt] += 1
        if op in ("sum", "cross_entropy", "max_pool2d", "max_pool2d_grad", "softmax", "log_softmax"):
            assert dt != "bf16", f"%{i} {op} runs in bf16"
    assert len(cast_sources) == len(set(cast_sources)), "a value is cast twice to the same dtype"
    # The wide layers run in bf16; the memory-bound ones (the 10-way head,
    # LeNet's 1-channel conv and its small dense layers) stay f32.
    assert products["bf16"] >= 3 and products["f32"] >= 2, products
