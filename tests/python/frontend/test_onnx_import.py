"""ONNX import (core/src/io/onnx_*.cpp) through spora.load and the C API.

Models come from tests' own protobuf writer (onnx_writer.py), and from the
`onnx` package and torch.onnx.export when those are installed (optional:
skipped otherwise). Outputs are checked against numpy implementations of
the same math."""
import math
import os

import numpy as np
import pytest

import spora
from onnx_writer import DOUBLE, FLOAT, INT64, graph, model, node, tensor, value_info

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run(path, *xs):
    g = spora.load(str(path))
    out = g(*[spora.Tensor(x) for x in xs])
    if isinstance(out, tuple):
        return [o.numpy() for o in out]
    return out.numpy()


def write(tmp_path, name, g, **kw):
    p = tmp_path / name
    p.write_bytes(model(g, **kw))
    return p


# -- numpy references -------------------------------------------------------------------

def np_conv(x, w, b, stride, pads):  # pads: top, left, bottom, right (ONNX order)
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return (y + b[None, :, None, None]).astype(np.float32)


def np_pool(x, k, stride, pads, mode, count_include_pad=False):
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, w = xp.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    y = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            if mode == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = k * k if count_include_pad else ones[:, :, i * stride:i * stride + k,
                                                           j * stride:j * stride + k].sum(axis=(2, 3))
                y[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return y


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# -- models from the test writer ------------------------------------------------------

def test_mlp_gemm_relu_softmax_any_batch(tmp_path):
    w1, b1, w2, b2 = f32(16, 8), f32(16), f32(16, 4), f32(4)
    g = graph([node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
               node("Relu", ["h"], ["r"]),
               node("Gemm", ["r", "w2", "b2"], ["z"], alpha=0.5, beta=2.0),
               node("Softmax", ["z"], ["y"], axis=1)],
              inputs=[value_info("x", FLOAT, ["N", 8])], outputs=[value_info("y", FLOAT, ["N", 4])],
              initializers=[tensor("w1", w1), tensor("b1", b1, "typed"), tensor("w2", w2), tensor("b2", b2)])
    p = write(tmp_path, "mlp.onnx", g)
    cell = spora.load(str(p))
    (name, dtype, shape), = cell.input_types
    assert name == "x" and dtype == spora.float32 and tuple(shape) == (1, 8)  # symbolic N stored as 1
    for batch in (1, 5, 3):
        x = f32(batch, 8)
        want = np_softmax(0.5 * (np.maximum(x @ w1.T + b1, 0) @ w2) + 2.0 * b2, axis=1)
        np.testing.assert_allclose(cell(spora.Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_cnn_conv_bn_pools_flatten(tmp_path):
    w, b = f32(4, 3, 3, 3), f32(4)
    gamma, beta, mean = f32(4), f32(4), f32(4)
    var = np.abs(f32(4)) + 0.5
    fw, fb = f32(5, 4 * 2 * 2), f32(5)
    g = graph([node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 0, 1, 2], strides=[1, 1]),
               node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], epsilon=1e-3),
               node("Relu", ["n"], ["r"]),
               node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
               node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
               node("Flatten", ["a"], ["f"]),
               node("Gemm", ["f", "fw", "fb"], ["z"], transB=1),
               node("LogSoftmax", ["z"], ["y"]),
               node("GlobalAveragePool", ["a"], ["gap"])],
              inputs=[value_info("x", FLOAT, ["batch", 3, 4, 4])],
              outputs=[value_info("y", FLOAT, ["batch", 5]), value_info("gap", FLOAT, ["batch", 4, 1, 1])],
              initializers=[tensor(n, v, "typed" if n in ("gamma", "var") else "raw")
                            for n, v in (("w", w), ("b", b), ("gamma", gamma), ("beta", beta), ("mean", mean),
                                         ("var", var), ("fw", fw), ("fb", fb))])
    p = write(tmp_path, "cnn.onnx", g, opset=13)
    for batch in (2, 3):
        x = f32(batch, 3, 4, 4)
        c = np_conv(x, w, b, 1, [1, 0, 1, 2])  # (batch, 4, 4, 4)
        n = (c - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-3) * gamma[:, None, None] + beta[:, None, None]
        m = np_pool(np.maximum(n, 0), 2, 2, [0, 0, 0, 0], "max")
        a = np_pool(m, 3, 1, [1, 1, 1, 1], "avg", count_include_pad=False)
        z = a.reshape(batch, -1) @ fw.T + fb
        want_y = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
        y, gap = run(p, x)
        np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gap, a.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


def test_elementwise_layout_constants(tmp_path):
    bias = f32(4)
    shape = np.array([0, -1], np.int64)  # keep dim 0, infer the rest
    g = graph([node("Constant", [], ["shape"], value=tensor("shape", shape, "typed")),
               node("Constant", [], ["two"], value_float=2.0),
               node("Add", ["a", "bias"], ["s"]),          # broadcast (3,4) + (4,)
               node("Sub", ["s", "b"], ["d"]),
               node("Mul", ["d", "two"], ["m"]),
               node("Div", ["m", "b"], ["q"]),
               node("Sigmoid", ["q"], ["sg"]),
               node("Tanh", ["a"], ["th"]),
               node("Erf", ["a"], ["er"]),
               node("Concat", ["sg", "th", "er"], ["cat"], axis=-1),   # (3, 12)
               node("Transpose", ["cat"], ["t"]),                       # (12, 3)
               node("Identity", ["t"], ["id"]),
               node("Dropout", ["id"], ["dr"], ratio=0.5),
               node("Reshape", ["dr", "shape"], ["rs"]),                # (12, 3)
               node("MatMul", ["rs", "c"], ["y"])],                     # (12, 3) @ (3, 2)
              inputs=[value_info("a", FLOAT, [3, 4]), value_info("b", FLOAT, [3, 4]), value_info("c", FLOAT, [3, 2])],
              outputs=[value_info("y", FLOAT, [12, 2]), value_info("cat", FLOAT, [3, 12])],
              initializers=[tensor("bias", bias)])
    p = write(tmp_path, "ew.onnx", g, opset=15)
    a, b, c = f32(3, 4), np.abs(f32(3, 4)) + 0.5, f32(3, 2)
    q = (a + bias - b) * 2.0 / b
    erf = np.vectorize(math.erf)(a.astype(np.float64)).astype(np.float32)
    cat = np.concatenate([1 / (1 + np.exp(-q)), np.tanh(a), erf], axis=-1)
    y, got_cat = run(p, a, b, c)
    np.testing.assert_allclose(got_cat, cat, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, cat.T @ c, rtol=1e-5, atol=1e-5)


def test_batched_matmul_and_double(tmp_path):
    w = RNG.standard_normal((4, 3)).astype(np.float64)
    g = graph([node("MatMul", ["x", "w"], ["y"])], inputs=[value_info("x", DOUBLE, [2, 5, 4])],
              outputs=[value_info("y", DOUBLE, [2, 5, 3])], initializers=[tensor("w", w, "typed")])
    p = write(tmp_path, "mm.onnx", g)
    x = RNG.standard_normal((2, 5, 4))
    np.testing.assert_allclose(run(p, x), x @ w, rtol=1e-12)


# -- errors -------------------------------------------------------------------------

def relu_graph(op="Relu", domain=None):
    n = node(op, ["x"], ["y"], name="the_node")
    if domain:
        from onnx_writer import f_bytes
        n += f_bytes(7, domain)
    return graph([n], inputs=[value_info("x", FLOAT, [2])], outputs=[value_info("y", FLOAT, [2])])


def test_unsupported_op_names_type_node_and_opset(tmp_path):
    p = write(tmp_path, "bad.onnx", relu_graph("LSTM"), opset=16)
    with pytest.raises(spora.SporaError, match=r"bad\.onnx.*node 'the_node' \(LSTM, opset 16\).*op type 'LSTM' is not "
                                               r"supported"):
        spora.load(str(p))


def test_unsupported_opset_and_domain(tmp_path):
    p = write(tmp_path, "old.onnx", relu_graph(), opset=6)
    with pytest.raises(spora.SporaError, match=r"old\.onnx.*opset 6 is not supported.*7 to 21"):
        spora.load(str(p))
    p = write(tmp_path, "dom.onnx", relu_graph(domain="com.microsoft"))
    with pytest.raises(spora.SporaError, match=r"dom\.onnx.*domain 'com\.microsoft' is not supported"):
        spora.load(str(p))


def test_shape_errors_name_the_node(tmp_path):
    g = graph([node("MatMul", ["x", "w"], ["y"], name="mm")], inputs=[value_info("x", FLOAT, [2, 3])],
              outputs=[value_info("y", FLOAT, [2, 2])], initializers=[tensor("w", f32(4, 2))])
    with pytest.raises(spora.SporaError, match=r"node 'mm' \(MatMul, opset 17\).*\[matmul\]"):
        spora.load(str(write(tmp_path, "mm.onnx", g)))
    # a zero stride with SAME padding divides by it: an error naming the node
    g = graph([node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], strides=[0, 0], auto_pad="SAME_UPPER")],
              inputs=[value_info("x", FLOAT, [1, 1, 4, 4])], outputs=[value_info("y", FLOAT, [1, 1, 2, 2])])
    with pytest.raises(spora.SporaError, match=r"node 'mp'.*strides must be >= 1"):
        spora.load(str(write(tmp_path, "mp.onnx", g)))
    g = graph([node("Reshape", ["x", "s"], ["y"], name="rs")], inputs=[value_info("x", FLOAT, [2, 3]),
                                                                        value_info("s", INT64, [2])],
              outputs=[value_info("y", FLOAT, [3, 2])])
    with pytest.raises(spora.SporaError, match=r"node 'rs'.*shape input must be known at import time"):
        spora.load(str(write(tmp_path, "rs.onnx", g)))


def test_bad_initializers(tmp_path):
    def load_with(t, name):
        g = graph([node("Add", ["x", "w"], ["y"])], inputs=[value_info("x", FLOAT, [2])],
                  outputs=[value_info("y", FLOAT, [2])], initializers=[t])
        p = write(tmp_path, name, g)
        with pytest.raises(spora.SporaError) as e:
            spora.load(str(p))
        assert name in str(e.value)
        return str(e.value)

    from onnx_writer import f_bytes, f_varint
    # raw_data shorter than the dims need
    assert "raw_data is 4 bytes" in load_with(f_varint(1, 2) + f_varint(2, FLOAT) + f_bytes(8, "w")
                                              + f_bytes(9, b"\0" * 4), "short.onnx")
    # huge dims with a few bytes: refused before allocating
    msg = load_with(f_varint(1, 1 << 40) + f_varint(1, 1 << 40) + f_varint(2, FLOAT) + f_bytes(8, "w")
                    + f_bytes(9, b"\0" * 8), "huge.onnx")
    assert "overflow" in msg or "needs" in msg
    # typed field with too few values
    assert "float_data holds 1 values" in load_with(f_varint(1, 2) + f_varint(2, FLOAT) + f_bytes(8, "w")
                                                    + f_bytes(4, b"\0" * 4), "typed.onnx")
    # unsupported element type
    assert "STRING" in load_with(f_varint(1, 2) + f_varint(2, 8) + f_bytes(8, "w"), "str.onnx")


def test_external_data_inside_dir_only(tmp_path):
    w = f32(2)
    (tmp_path / "w.bin").write_bytes(b"\0" * 16 + w.tobytes())

    def graph_with(location, offset=16):
        return graph([node("Add", ["x", "w"], ["y"])], inputs=[value_info("x", FLOAT, [2])],
                     outputs=[value_info("y", FLOAT, [2])],
                     initializers=[tensor("w", w, ("external", location, offset))])

    p = write(tmp_path, "ext.onnx", graph_with("w.bin"))
    x = f32(2)
    np.testing.assert_allclose(run(p, x), x + w)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "w.bin").write_bytes(b"\0" * 16 + w.tobytes())
    for bad, why in ((graph_with("../w.bin"), "escapes the model's directory"),
                     (graph_with(str(tmp_path / "w.bin")), "must be a path relative"),
                     (graph_with("w.bin", offset=20), "runs past its end"),
                     (graph_with("missing.bin"), "not found")):
        p = sub / "m.onnx"
        p.write_bytes(model(bad))
        with pytest.raises(spora.SporaError, match=r"m\.onnx.*tensor 'w'.*" + why):
            spora.load(str(p))
    os.symlink(tmp_path / "w.bin", sub / "link.bin")  # noqa: the same bytes, outside  # a symlink out of the directory
    p.write_bytes(model(graph_with("link.bin")))
    with pytest.raises(spora.SporaError, match="escapes"):
        spora.load(str(p))


# -- hostile bytes: every truncation and byte garbling fails cleanly -------------------

def _valid_model_bytes():
    # Every kind of field the importer reads: int, float, ints and tensor
    # attributes, raw and typed (packed and unpacked) data, symbolic dims.
    g = graph([node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
               node("Constant", [], ["shape"], value=tensor("s", np.array([-1, 4], np.int64), "typed")),
               node("Reshape", ["c", "shape"], ["r"]),
               node("Gemm", ["r", "w", "b"], ["h"], transB=1, alpha=1.0),
               node("Relu", ["h"], ["y"])],
              inputs=[value_info("x", FLOAT, ["N", 1, 2, 2])], outputs=[value_info("y", FLOAT, ["N", 2])],
              initializers=[tensor("cw", f32(1, 1, 3, 3)), tensor("w", f32(2, 4)), tensor("b", f32(2), "typed")])
    return model(g)


def test_every_truncation_is_an_error_naming_the_file(tmp_path):
    data = _valid_model_bytes()
    p = tmp_path / "cut.onnx"
    for n in range(len(data)):
        p.write_bytes(data[:n])
        with pytest.raises(spora.SporaError, match=r"cut\.onnx"):
            spora.load(str(p))


def test_garbled_bytes_never_crash(tmp_path):
    data = _valid_model_bytes()
    p = tmp_path / "garbled.onnx"
    x = spora.Tensor(f32(2, 1, 2, 2))
    p.write_bytes(data)
    assert run(p, x.numpy()).shape == (2, 2)  # the unmodified model is valid and runs
    loaded = 0
    for i in range(len(data)):
        for v in (0x00, 0xFF, 0x80, data[i] ^ 0x01):
            b = bytearray(data)
            b[i] = v
            p.write_bytes(bytes(b))
            try:
                g = spora.load(str(p))
            except spora.SporaError as e:
                assert "garbled.onnx" in str(e)
                continue
            loaded += 1  # some changes keep a valid model (a float's bits, a name)
            try:
                g(x)
            except (spora.SporaError, ValueError):
                pass
    assert loaded > 0  # the loop reached the run path too


def test_hostile_varints_and_lengths(tmp_path):
    from onnx_writer import f_bytes, key, varint
    cases = {
        "varint11.onnx": key(1, 0) + b"\xff" * 10 + b"\x01",                 # varint longer than 64 bits
        "varint_cut.onnx": key(1, 0) + b"\x80\x80",                          # truncated varint
        "len_past.onnx": key(7, 2) + varint(1 << 40) + b"\0" * 8,            # length past the end
        "group.onnx": key(7, 3),                                             # group wire type
        "field0.onnx": b"\x02\x00",                                          # field number 0
        "nograph.onnx": f_bytes(2, "x"),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(spora.SporaError, match=name.replace(".", r"\.")):
            spora.load(str(p))


# -- optional: the onnx package and torch.onnx.export -----------------------------------

def test_onnx_package_model(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w, b = f32(3, 4), f32(3)
    x = f32(2, 4)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1), helper.make_node("Tanh", ["h"], ["t"]),
         helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(w, "w"), helper.make_tensor("b", TensorProto.FLOAT, [3], b.tolist())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    p = tmp_path / "pkg.onnx"
    onnx.save(m, str(p))
    np.testing.assert_allclose(run(p, x), np_softmax(np.tanh(x @ w.T + b)), rtol=1e-5, atol=1e-6)


def test_torch_onnx_export_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 10), torch.nn.LogSoftmax(dim=1)).eval()
    with torch.no_grad():
        net[1].running_mean.uniform_(-1, 1)
        net[1].running_var.uniform_(0.5, 2)
    x = torch.randn(3, 1, 8, 8)
    p = tmp_path / "torch.onnx"
    try:
        torch.onnx.export(net, (x,), str(p), opset_version=17, dynamo=False,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    except Exception as e:  # an exporter that needs more packages than are installed
        pytest.skip(f"torch.onnx.export failed here: {e}")
    with torch.no_grad():
        want = net(x).numpy()
        want5 = net(torch.randn(5, 1, 8, 8).mul_(0) + 1).numpy()
    np.testing.assert_allclose(run(p, x.numpy()), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(p, np.ones((5, 1, 8, 8), np.float32)), want5, rtol=1e-4, atol=1e-5)


def test_millions_of_empty_entries_are_refused(tmp_path):
    # 2 bytes on the wire per empty node input, ~30 bytes each once parsed:
    # past the item cap the file is refused before it grows further.
    from onnx_writer import f_bytes
    node_bytes = b"\x0a\x00" * ((1 << 22) + 1)
    p = tmp_path / "empties.onnx"
    p.write_bytes(f_bytes(7, f_bytes(1, node_bytes)))
    with pytest.raises(spora.SporaError, match=r"empties\.onnx.*graph items.*refused as hostile"):
        spora.load(str(p))
