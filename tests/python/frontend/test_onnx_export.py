"""ONNX export (core/src/io/onnx_export*.cpp) through spora.export(...,
file_format="ONNX") and the C API's spora_model_export_onnx.

Exported files run in onnxruntime when it is installed (skipped otherwise)
and must give Spora's own outputs; every file is also read back by Spora's
importer, which needs nothing but Spora."""
import os
import sys

import numpy as np
import pytest

import spora
from spora import nn, ops

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from fashion_mnist import LeNet  # noqa: E402  (the main job's network)

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ort_run(path, *xs):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(s.get_inputs(), xs)}
    return s.run(None, feeds)


def spora_run(net, *xs):
    net.set_train(False)
    out = net(*[spora.Tensor(x) for x in xs])
    return [o.numpy() for o in out] if isinstance(out, tuple) else [out.numpy()]


def export(tmp_path, net, *xs, name="m", **kw):
    return spora.export(net, *[spora.Tensor(x) for x in xs], file_name=str(tmp_path / name), file_format="ONNX",
                        **kw)


class Fn(nn.Cell):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, *xs):
        return self.fn(*xs)


def reimport(path, *xs):
    out = spora.load(str(path))(*[spora.Tensor(x) for x in xs])
    return [o.numpy() for o in out] if isinstance(out, tuple) else [out.numpy()]


def test_lenet_runs_in_onnxruntime_at_any_batch(tmp_path):
    net = LeNet()
    x = f32(2, 1, 28, 28)
    path = export(tmp_path, net, x, name="lenet", dynamic_batch=True)
    assert path.endswith("lenet.onnx")
    for batch in (x, f32(5, 1, 28, 28)):
        want = spora_run(net, batch)[0]
        np.testing.assert_allclose(ort_run(path, batch)[0], want, rtol=1e-4, atol=1e-5)


def test_trained_lenet_runs_in_onnxruntime(tmp_path):
    # A few training steps (Adam, as the main job trains it) first: the
    # file holds the trained values, and onnxruntime gives Spora's outputs.
    net = LeNet()
    before = {n: p.numpy().copy() for n, p in net.parameters_and_names()}
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()),
                               nn.Adam(net.trainable_params(), learning_rate=1e-2))
    step.set_train(True)
    x = f32(8, 1, 28, 28)
    labels = spora.Tensor(RNG.integers(0, 10, 8).astype(np.int32))
    for _ in range(3):
        step(spora.Tensor(x), labels)
    assert all(not np.array_equal(before[n], p.numpy()) for n, p in net.parameters_and_names())
    path = export(tmp_path, net, x[:1], name="trained", dynamic_batch=True)
    for batch in (x, f32(3, 1, 28, 28)):
        want = spora_run(net, batch)[0]
        np.testing.assert_allclose(ort_run(path, batch)[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_lenet_round_trips_through_the_importer(tmp_path):
    net = LeNet()
    x = f32(3, 1, 28, 28)
    path = export(tmp_path, net, x, name="lenet")
    np.testing.assert_allclose(reimport(path, x)[0], spora_run(net, x)[0], rtol=1e-5, atol=1e-6)


def test_the_file_is_opset_17_with_weights_as_initializers(tmp_path):
    onnx = pytest.importorskip("onnx")
    net = LeNet()
    path = export(tmp_path, net, f32(1, 1, 28, 28), dynamic_batch=True)
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    inits = [onnx.numpy_helper.to_array(t) for t in m.graph.initializer]
    for name, p in net.parameters_and_names():
        assert any(i.shape == tuple(p.shape) and np.array_equal(i, p.numpy()) for i in inits), name
    assert not m.graph.node or all(n.domain == "" for n in m.graph.node)
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert m.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_transformer_layer_runs_in_onnxruntime(tmp_path):
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0)
    x = f32(2, 5, 16)
    path = export(tmp_path, layer, x, name="encoder")
    np.testing.assert_allclose(ort_run(path, x)[0], spora_run(layer, x)[0], rtol=1e-4, atol=1e-5)


def test_transformer_layer_round_trips_through_the_importer(tmp_path):
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0)
    x = f32(2, 5, 16)
    path = export(tmp_path, layer, x, name="encoder")
    np.testing.assert_allclose(reimport(path, x)[0], spora_run(layer, x)[0], rtol=1e-4, atol=1e-5)


# One small graph per op family: the exporter's mapping checked against
# onnxruntime (each case is the op as traced, so its attributes are the
# canonical ones inference leaves).
X = f32(2, 3, 4, 5)
POS = np.abs(X) + 0.5
CASES = {
    "unary": (lambda x: ops.exp(ops.tanh(x)) + ops.sigmoid(x) * ops.erf(x) - ops.abs(ops.neg(x)), [X]),
    "unary2": (lambda x: ops.sqrt(x) + ops.log(x) + ops.rsqrt(x) + ops.reciprocal(x) + ops.log1p(x) + ops.square(x),
               [POS]),
    "rounding": (lambda x: ops.floor(x) + ops.ceil(x) + ops.sign(x) + ops.sin(x) + ops.cos(x), [X]),
    "activations": (lambda x: ops.silu(x) + ops.gelu(x) + ops.gelu(x, approximate="tanh") + ops.leaky_relu(x, 0.1)
                    + ops.softplus(x) + ops.relu(x), [X]),
    "binary": (lambda x, y: ops.maximum(x, y) - ops.minimum(x, y) + x / (ops.abs(y) + 1) + ops.pow(ops.abs(x), y),
               [X, f32(4, 5)]),
    "compare": (lambda x, y: ops.where(ops.logical_or(ops.greater(x, y), ops.not_equal(x, x)), x, y)
                + ops.cast(ops.less_equal(x, y), spora.float32), [X, f32(2, 3, 4, 5)]),
    "clip": (lambda x: ops.clip(x, -0.5, 0.7) + ops.clip(x, min=0.1), [X]),
    "softmax": (lambda x: ops.softmax(x, axis=1) + ops.log_softmax(x, axis=-1), [X]),
    "matmul": (lambda a, b: ops.matmul(a, b), [f32(2, 3, 4, 6), f32(6, 5)]),
    "reduce": (lambda x: ops.sum(x, axis=(1, 2)) + ops.mean(x, axis=(1, 2)) + ops.amax(x, axis=(1, 2))
               + ops.amin(x, axis=(1, 2)) + ops.logsumexp(x, axis=(1, 2)), [X]),
    "reduce_all": (lambda x: ops.sum(x) * ops.mean(x, keepdims=True), [X]),
    "var": (lambda x: ops.var(x, axis=(2, 3), ddof=1) + ops.std(x, axis=(2, 3)), [X]),
    "layout": (lambda x: ops.transpose(ops.reshape(x, (6, 20)), (1, 0)), [X]),
    "concat": (lambda x: ops.concat((x, x * 2), axis=1) + 0, [X]),
    "stack": (lambda x: ops.stack((x, x + 1), axis=2), [X]),
    "split": (lambda x: ops.split(x, (1, 4), axis=3)[1], [X]),
    "squeeze": (lambda x: ops.expand_dims(ops.squeeze(ops.slice(x, starts=[0], ends=[1], axes=[1]), 1), 0), [X]),
    "slices": (lambda x: ops.strided_slice(x, begin=[0, 0, 1, 0], end=[2, 3, 4, 5], strides=[1, 2, 2, 1])
               + ops.flip(ops.strided_slice(x, begin=[0, 0, 1, 0], end=[2, 3, 4, 5], strides=[1, 2, 2, 1]), axis=3),
               [X]),
    "tile": (lambda x: ops.tile(x, (1, 2, 1, 1)) + ops.broadcast_to(ops.slice(x, starts=[0], ends=[1], axes=[1]),
                                                                      (2, 6, 4, 5)), [X]),
    "pad": (lambda x: ops.pad(x, (2, 1, 1, 2), value=0.5) + ops.pad(x, (2, 1, 1, 2), mode="reflect"), [X]),
    "cumsum": (lambda x: ops.cumsum(x, axis=2), [X]),
    "argmax": (lambda x: ops.cast(ops.argmax(x, axis=1), spora.float32) + ops.cast(ops.argmin(x), spora.float32),
               [X]),
    "topk": (lambda x: ops.topk(x, 2, axis=-1)[0] + ops.cast(ops.topk(x, 2, axis=-1)[1], spora.float32), [X]),
    "gather": (lambda x: ops.gather(x, spora.Tensor(np.array([2, 0], np.int64)), axis=2), [X]),
    "conv_pool": (lambda x: ops.avg_pool2d(ops.max_pool2d(x, 2, 1), 2, 1, count_include_pad=False), [X]),
    "adaptive": (lambda x: ops.adaptive_avg_pool2d(x, (1, 1)) + ops.mean(x), [X]),
    "group_norm": (lambda x: ops.group_norm(ops.reshape(x, (2, 4, 3, 5)), 2), [X]),
    "creation": (lambda x: x + ops.ones((5,)) * 2 + ops.arange(5, dtype=spora.float32), [X]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(tmp_path, case):
    fn, xs = CASES[case]
    net = Fn(fn)
    want = spora_run(net, *xs)
    path = export(tmp_path, net, *xs, name=case)
    got = ort_run(path, *xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_round_trips_through_the_importer(tmp_path, case):
    fn, xs = CASES[case]
    net = Fn(fn)
    path = export(tmp_path, net, *xs, name=case)
    for g, w in zip(reimport(path, *xs), spora_run(net, *xs)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_an_op_without_mapping_is_named(tmp_path):
    idx = spora.Tensor(np.array([[0, 2, 1], [3, 3, 0]], np.int64))
    net = Fn(lambda x, u: ops.scatter_add(x, idx, u))
    with pytest.raises(ValueError, match=r"\[onnx export\].*op 'scatter_add'.*has no ONNX mapping"):
        export(tmp_path, net, f32(4, 3), f32(2, 3))
    assert not os.path.exists(tmp_path / "m.onnx")


def test_dynamic_batch_needs_one_batch_size(tmp_path):
    net = Fn(lambda x, y: ops.sum(x) + ops.sum(y))
    with pytest.raises(ValueError, match="disagree on the batch size"):
        export(tmp_path, net, f32(2, 3), f32(4, 3), dynamic_batch=True)
