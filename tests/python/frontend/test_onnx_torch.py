"""ONNX files written by PyTorch's exporter (torch.onnx.export, generated at
test time) imported by Spora and checked against onnxruntime: a
ResNet-style net, zoo-style CNNs (AlexNet/GoogLeNet kind, with weights
rebuilt by constant subgraphs as zoo files have them), and a BERT-style
encoder with dynamic batch and sequence whose position ids are
`arange(seq_len)`, run at several (batch, seq) through the plan cache;
a 1-D conv / ConvTranspose / TopK net. Written by the TorchScript exporter
(dynamo=False), and, where onnxscript is installed, three of them by the
default torch.export-based one too.

Skipped where torch, onnx or onnxruntime is missing (torch is never a
requirement of Spora or of its test venv); to run them, use an interpreter
that has all three and put the build's python directory on PYTHONPATH."""
import math

import numpy as np
import pytest

import spora

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

nn = torch.nn
F = torch.nn.functional
RTOL = 1e-4


def export(tmp_path, model, args, name, dynamic_axes=None, opset=17):
    """The legacy (TorchScript) exporter: the default one needs onnxscript,
    and this one writes the Shape/Gather/Range subgraphs the importer must
    read."""
    model.eval()
    path = tmp_path / f"{name}.onnx"
    names = [f"in{i}" for i in range(len(args))]
    torch.onnx.export(model, tuple(args), str(path), dynamo=False, opset_version=opset, input_names=names,
                      output_names=["out"], dynamic_axes=dynamic_axes)
    return path


def ort_run(path, *xs):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: x for i, x in zip(s.get_inputs(), xs)})


def max_rel(got, want):
    """The largest error relative to the output's magnitude (elementwise
    relative error is meaningless where an output crosses 0)."""
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def check(net, path, *xs):
    got = net(*[spora.Tensor(x) for x in xs])
    got = [o.numpy() for o in got] if isinstance(got, tuple) else [got.numpy()]
    want = ort_run(path, *xs)
    assert len(got) == len(want)
    worst = 0.0
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * np.max(np.abs(w)))
        worst = max(worst, max_rel(g, w))
    print(f"{path.name} {[x.shape for x in xs]}: max error / max |output| = {worst:.2e}")
    return worst


def seeded(model):
    torch.manual_seed(0)
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.6, 1.4)
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
    return model.eval()


def images(n, c=3, size=32, seed=1):
    return np.random.default_rng(seed).standard_normal((n, c, size, size)).astype(np.float32)


# -- ResNet-style ----------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def test_resnet_style_net_from_torch(tmp_path):
    model = seeded(ResNet())
    path = export(tmp_path, model, [torch.zeros(2, 3, 32, 32)], "resnet", {"in0": {0: "batch"}, "out": {0: "batch"}})
    net = spora.load(str(path))
    for b in (2, 5):
        check(net, path, images(b))


# -- zoo-style CNNs ----------------------------------------------------------------------


class LRN(torch.autograd.Function):
    """Local response normalisation written as ONNX's LRN, as zoo files
    have it (torch's exporter writes it as a 3-D pool under an If)."""

    @staticmethod
    def forward(ctx, x):
        return F.local_response_norm(x, 5, 1e-4, 0.75, 2.0)

    @staticmethod
    def symbolic(g, x):
        return g.op("LRN", x, size_i=5, alpha_f=1e-4, beta_f=0.75, bias_f=2.0)


class OnnxLRN(nn.Module):
    def forward(self, x):
        return LRN.apply(x)


class AlexNetLike(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 5, 2, 2), nn.ReLU(inplace=True), OnnxLRN(),
            nn.MaxPool2d(3, 2), nn.Conv2d(16, 24, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2, ceil_mode=True))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(24 * 5 * 5, 32), nn.ReLU(inplace=True),
                                        nn.Dropout(0.5), nn.Linear(32, classes))

    def forward(self, x):
        return F.softmax(self.classifier(torch.flatten(self.features(x), 1)), dim=1)


class Inception(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b1 = nn.Conv2d(cin, 8, 1)
        self.b3 = nn.Sequential(nn.Conv2d(cin, 6, 1), nn.ReLU(), nn.Conv2d(6, 8, 3, padding=1))
        self.b5 = nn.Sequential(nn.Conv2d(cin, 4, 1), nn.ReLU(), nn.Conv2d(4, 8, 5, padding=2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(cin, 8, 1))

    def forward(self, x):
        return F.relu(torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1))


class GoogLeNetLike(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.inc = nn.Sequential(Inception(16), Inception(32))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        y = F.avg_pool2d(self.inc(self.stem(x)), 3, 1, 1, count_include_pad=False)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class SqueezeLike(nn.Module):
    """SqueezeNet/DenseNet traits: fire modules, a dense concat, global
    max pooling, a 1x1 conv classifier."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True))
        self.sq = nn.Conv2d(16, 8, 1)
        self.e1 = nn.Conv2d(8, 16, 1)
        self.e3 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(48)
        self.head = nn.Conv2d(48, classes, 1)

    def forward(self, x):
        x = self.stem(x)
        s = F.relu(self.sq(x))
        x = torch.cat([x, F.relu(self.e1(s)), F.relu(self.e3(s))], 1)  # dense: keeps its input
        return torch.flatten(F.adaptive_max_pool2d(self.head(F.relu(self.bn(x))), 1), 1)


def with_constant_subgraph_weights(path):
    """Zoo files build some weights with small constant subgraphs: every
    1-D weight (biases, BatchNorm parameters) becomes ConstantOfShape(its
    shape) + a Reshape of its values (a Constant) to its own Shape."""
    m = onnx.load(str(path))
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    new_nodes, moved = [], set()
    for t in list(g.initializer):
        a = numpy_helper.to_array(t)
        if a.ndim != 1 or a.dtype != np.float32:
            continue
        n = t.name
        moved.add(n)
        # value = ConstantOfShape(Shape(a)) + a, where the first operand is
        # zeros of a's shape computed from a Constant's shape
        new_nodes += [
            helper.make_node("Constant", [], [n + "/v"], value=numpy_helper.from_array(a, n + "/v")),
            helper.make_node("Shape", [n + "/v"], [n + "/shape"]),
            helper.make_node("ConstantOfShape", [n + "/shape"], [n + "/zeros"],
                             value=helper.make_tensor(n + "/z", onnx.TensorProto.FLOAT, [1], [0.0])),
            helper.make_node("Reshape", [n + "/v", n + "/shape"], [n + "/r"]),
            helper.make_node("Add", [n + "/zeros", n + "/r"], [n]),
        ]
    keep = [t for t in g.initializer if t.name not in moved]
    del g.initializer[:]
    g.initializer.extend(keep)
    nodes = new_nodes + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    assert moved and inits
    onnx.checker.check_model(m)
    out = path.with_name(path.stem + "_zoo.onnx")
    onnx.save(m, str(out))
    return out


@pytest.mark.parametrize("name,cls,size", [("alexnet", AlexNetLike, 40), ("googlenet", GoogLeNetLike, 16),
                                           ("squeezenet", SqueezeLike, 32)])
def test_zoo_style_cnn_from_torch(tmp_path, name, cls, size):
    model = seeded(cls())
    # opset 9, as the zoo's files are
    path = export(tmp_path, model, [torch.zeros(1, 3, size, size)], name, {"in0": {0: "N"}, "out": {0: "N"}}, opset=9)
    assert onnx.load(str(path)).opset_import[0].version == 9
    zoo = with_constant_subgraph_weights(path)
    assert any(n.op_type == "ConstantOfShape" for n in onnx.load(str(zoo)).graph.node)
    for p in (path, zoo):
        net = spora.load(str(p))
        for b in (1, 3):
            check(net, p, images(b, size=size, seed=b))


# -- BERT-style encoder with dynamic batch and sequence ----------------------------------------


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x, bias):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.h, self.dh).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh) + bias, dim=-1)
        return self.o((p @ v).transpose(1, 2).reshape(b, s, d))


class Layer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.att = Attention(d, heads)
        self.n1, self.n2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.f1, self.f2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, bias):
        x = self.n1(x + self.att(x, bias))
        return self.n2(x + self.f2(F.gelu(self.f1(x))))


class Bert(nn.Module):
    def __init__(self, vocab=100, d=32, heads=4, ffn=64, layers=2, max_pos=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.typ = nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(Layer(d, heads, ffn) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, ids, mask, types):
        pos = torch.arange(ids.shape[1], dtype=torch.long)  # position ids: a Range over the sequence length
        x = self.norm(self.tok(ids) + self.pos(pos) + self.typ(types))
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


class BertSlicedPositions(Bert):
    """Position ids as a slice of a registered buffer, as Hugging Face's
    BERT takes them: Slice(position_ids, 0, seq_len)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("position_ids", torch.arange(64).unsqueeze(0))

    def forward(self, ids, mask, types):
        pos = self.position_ids[:, :ids.shape[1]]
        x = self.norm(self.tok(ids) + self.pos(pos) + self.typ(types))
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


def bert_inputs(b, s, seed):
    r = np.random.default_rng(seed)
    ids = r.integers(0, 100, (b, s)).astype(np.int64)
    mask = np.ones((b, s), np.int64)
    mask[0, s // 2:] = 0  # padding in the first sequence
    types = (np.arange(s)[None, :] >= s // 3).astype(np.int64).repeat(b, 0)
    return ids, mask, types


@pytest.mark.parametrize("cls", [Bert, BertSlicedPositions])
def test_bert_style_encoder_dynamic_batch_and_sequence(tmp_path, cls):
    model = seeded(cls())
    with torch.no_grad():  # embeddings on the scale trained BERTs have
        for e in (model.tok, model.pos, model.typ):
            e.weight.mul_(0.5)
    axes = {"in0": {0: "batch", 1: "seq"}, "in1": {0: "batch", 1: "seq"}, "in2": {0: "batch", 1: "seq"}}
    path = export(tmp_path, model, [torch.from_numpy(a) for a in bert_inputs(2, 8, 0)], cls.__name__.lower(), axes)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("Range" in ops) if cls is Bert else ("Slice" in ops)
    net = spora.load(str(path))
    # one loaded net, several sizes: the plan cache builds a plan per shape
    for i, (b, s) in enumerate([(2, 8), (3, 13), (1, 5), (2, 8)]):
        check(net, path, *bert_inputs(b, s, i + 1))
    # and what torch itself gives
    ids, mask, types = bert_inputs(3, 11, 9)
    with torch.no_grad():
        want = model(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))[0].numpy()
    got = net(spora.Tensor(ids), spora.Tensor(mask), spora.Tensor(types))[0].numpy()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * np.max(np.abs(want)))


# -- the other ops such exports need ---------------------------------------------------------


class Signal(nn.Module):
    """1-D convolutions and pooling, transposed convolutions (1-D and 2-D),
    TopK and CumSum, as audio / sequence / decoder models write them."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(2, 8, 5, stride=2, padding=2)
        self.bn = nn.BatchNorm1d(8)
        self.c2 = nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=4)
        self.up1 = nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1)
        self.up2 = nn.ConvTranspose2d(1, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        y = F.max_pool1d(F.relu(self.bn(self.c1(x))), 3, 2, 1)
        y = F.avg_pool1d(self.c2(y), 2, 1)
        y = self.up1(y)  # (N, 4, L)
        top, idx = torch.topk(y, 3, dim=-1)
        img = self.up2(y.unsqueeze(1))  # (N, 3, 8, 2L)
        return top + idx.to(y.dtype), torch.cumsum(img, 2)


def test_conv1d_conv_transpose_topk_from_torch(tmp_path):
    model = seeded(Signal())
    x = np.random.default_rng(4).standard_normal((2, 2, 40)).astype(np.float32)
    path = export(tmp_path, model, [torch.from_numpy(x)], "signal", {"in0": {0: "N"}})
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"Conv", "MaxPool", "AveragePool", "ConvTranspose", "TopK", "CumSum"} <= ops
    net = spora.load(str(path))
    check(net, path, x)
    check(net, path, np.random.default_rng(5).standard_normal((3, 2, 40)).astype(np.float32))


def test_3d_convolution_from_torch_is_refused_by_name(tmp_path):
    path = export(tmp_path, nn.Conv3d(1, 2, 3), [torch.zeros(1, 1, 4, 4, 4)], "conv3d")
    with pytest.raises(ValueError, match=r"\(Conv, opset 17\): 3-D convolution and pooling .* not supported"):
        spora.load(str(path))


# -- the default (torch.export-based) exporter, where onnxscript is installed ------------------


@pytest.mark.parametrize("name", ["resnet", "bert", "signal"])
def test_files_from_the_dynamo_exporter(tmp_path, name):
    pytest.importorskip("onnxscript")
    D = torch.export.Dim
    if name == "resnet":
        model, args, shapes = ResNet(), [torch.zeros(2, 3, 32, 32)], ({0: D("batch")},)
        runs = [[images(2)], [images(5)]]
    elif name == "bert":
        model, args = Bert(), [torch.from_numpy(a) for a in bert_inputs(2, 8, 0)]
        shapes = ({0: D("batch"), 1: D("seq", max=64)},) * 3
        runs = [bert_inputs(2, 8, 1), bert_inputs(3, 13, 2), bert_inputs(1, 4, 3)]
    else:
        model, args, shapes = Signal(), [torch.zeros(2, 2, 40)], ({0: D("N")},)
        runs = [[np.random.default_rng(b).standard_normal((b, 2, 40)).astype(np.float32)] for b in (2, 3)]
    model = seeded(model)
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(model, tuple(args), str(path), dynamo=True, opset_version=18, dynamic_shapes=shapes,
                      verbose=False)
    net = spora.load(str(path))
    for xs in runs:
        check(net, path, *xs)
