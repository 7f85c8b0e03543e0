"""ONNX import of models built with onnx.helper (skipped without the `onnx`
package) and checked against onnxruntime (skipped without it) or numpy:
shape subgraphs folded at import and kept symbolic for dynamic
dimensions, opsets 7-12 read as they define their ops, the ops of issue 21,
and whole models (a zoo-style CNN with constant-subgraph weights at opset
9, a ResNet-style net, a BERT-style encoder with dynamic batch and
sequence) within 1e-4 relative."""
import numpy as np
import pytest

import spora

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(3)
F = TensorProto.FLOAT


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def save(tmp_path, name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 15 else 8
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    return p


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def spora_run(path, *xs):
    out = spora.load(str(path))(*[spora.Tensor(x) for x in xs])
    return [o.numpy() for o in out] if isinstance(out, tuple) else [out.numpy()]


def ort_run(path, *xs):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: x for i, x in zip(s.get_inputs(), xs)})


def check(path, *xs, rtol=1e-4, atol=1e-5):
    for g, w in zip(spora_run(path, *xs), ort_run(path, *xs)):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# -- shape subgraphs ---------------------------------------------------------------------


def test_shape_subgraph_reshape_follows_the_batch(tmp_path):
    # y = reshape(x, [shape(x)[0], 12]) with a dynamic batch: folded at import,
    # kept symbolic (the batch dimension becomes Spora's inferred one).
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "twelve"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    p = save(tmp_path, "shape_sub", nodes, [vi("x", ["batch", 3, 4])], [vi("y", None)],
             [init("zero", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
              init("twelve", np.array([12], np.int64))])
    for b in (1, 2, 5):
        x = f32(b, 3, 4)
        np.testing.assert_array_equal(spora_run(p, x)[0], x.reshape(b, 12))


def test_constant_of_shape_range_and_shape_arithmetic_fold(tmp_path):
    # w = ConstantOfShape([4, 3]) * 0.5 + Range(0, 3); y = x @ w, with the
    # sizes computed from Shape/Size/Slice/Squeeze/Div/Mul/Cast on shapes.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),  # (2, 4)
        helper.make_node("Slice", ["s", "one", "two"], ["k1"]),  # [4]
        helper.make_node("Size", ["x"], ["sz"]),  # 8
        helper.make_node("Div", ["sz", "k0"], ["q"]),  # 8 // 4 = 2 (int)
        helper.make_node("Add", ["q", "one_s"], ["three"]),  # 3
        helper.make_node("Unsqueeze", ["three", "ax0"], ["three1"]),
        helper.make_node("Squeeze", ["k1", "ax0"], ["k0"]),
        helper.make_node("Concat", ["k1", "three1"], ["wshape"], axis=0),
        helper.make_node("ConstantOfShape", ["wshape"], ["w0"], value=helper.make_tensor("v", F, [1], [0.5])),
        helper.make_node("Cast", ["three"], ["three_f"], to=F),
        helper.make_node("Range", ["zero_f", "three_f", "one_f"], ["r"]),
        helper.make_node("Add", ["w0", "r"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    nodes = [nodes[0], nodes[1], nodes[6], nodes[2], nodes[3], nodes[4], nodes[5]] + nodes[7:]
    p = save(tmp_path, "fold", nodes, [vi("x", [2, 4])], [vi("y", None)],
             [init("one", np.array([1], np.int64)), init("two", np.array([2], np.int64)),
              init("one_s", np.array(1, np.int64)), init("ax0", np.array([0], np.int64)),
              init("zero_f", np.array(0, np.float32)), init("one_f", np.array(1, np.float32))])
    x = f32(2, 4)
    w = np.full((4, 3), 0.5, np.float32) + np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(spora_run(p, x)[0], x @ w, rtol=1e-6)
    check(p, x)


def range_model(tmp_path, name, start):
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Cast", ["n"], ["nf"], to=F),
        helper.make_node("Range", ["start", "nf", "one_f"], ["r"], name="range"),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    return save(tmp_path, name, nodes, [vi("x", [2, "seq"])], [vi("y", None)],
                [init("one", np.array(1, np.int64)), init("start", np.array(start, np.float32)),
                 init("one_f", np.array(1, np.float32))])


def test_a_range_over_a_dynamic_dimension_stays_symbolic(tmp_path):
    # Range(0, Shape(x)[1], 1): position ids up to the sequence length
    p = range_model(tmp_path, "range_dyn", 0)
    net = spora.load(str(p))
    for seq in (3, 1, 6):
        x = f32(2, seq)
        np.testing.assert_array_equal(net(spora.Tensor(x)).numpy(), x + np.arange(seq, dtype=np.float32))
    check(p, f32(2, 4))


def test_another_range_over_a_dynamic_dimension_is_refused_by_name(tmp_path):
    p = range_model(tmp_path, "range_dyn1", 1)  # its length is seq - 1: not kept symbolic
    with pytest.raises(ValueError, match=r"node 'range' \(Range, opset 17\).*Range\(0, n, 1\)"):
        spora.load(str(p))


def test_a_slice_of_a_position_table_up_to_the_sequence_length(tmp_path):
    # table[0:Shape(x)[1]] (Hugging Face's position_ids buffer): a Gather of
    # 0 .. seq-1; the same Slice from 1 is refused naming the node.
    def model(name, start):
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Slice", ["s", "i1", "i2"], ["n"]),
                 helper.make_node("Slice", ["table", "st", "n", "i0"], ["pos"], name="pos_slice"),
                 helper.make_node("Add", ["x", "pos"], ["y"])]
        return save(tmp_path, name, nodes, [vi("x", ["batch", "seq", 4])], [vi("y", None)],
                    [init("i0", np.array([0], np.int64)), init("i1", np.array([1], np.int64)),
                     init("i2", np.array([2], np.int64)), init("st", np.array([start], np.int64)),
                     init("table", f32(16, 4))])
    net = spora.load(str(model("pos", 0)))
    for b, s in ((2, 5), (3, 16), (1, 1)):
        x = f32(b, s, 4)
        check(tmp_path / "pos.onnx", x)
        assert net(spora.Tensor(x)).shape == (b, s, 4)
    with pytest.raises(ValueError, match=r"node 'pos_slice' \(Slice, opset 17\).*dynamic input dimension"):
        spora.load(str(model("pos1", 1)))


# -- opsets 7-12 --------------------------------------------------------------------------


def test_opset9_forms(tmp_path):
    # Softmax on a 3-D input flattens at axis 1; Unsqueeze/Squeeze/Slice/Pad/
    # Clip take attributes; Dropout names a mask nobody reads.
    nodes = [
        helper.make_node("Softmax", ["x"], ["sm"], axis=1),
        helper.make_node("Unsqueeze", ["sm"], ["u"], axes=[0]),
        helper.make_node("Squeeze", ["u"], ["q"], axes=[0]),
        helper.make_node("Slice", ["q"], ["sl"], starts=[0, 1], ends=[2, 100], axes=[0, 2]),
        helper.make_node("Pad", ["sl"], ["pd"], pads=[0, 0, 1, 0, 0, 2], value=0.25),
        helper.make_node("Clip", ["pd"], ["cl"], min=0.05, max=0.3),
        helper.make_node("Dropout", ["cl"], ["y", "mask"], ratio=0.5),
    ]
    p = save(tmp_path, "opset9", nodes, [vi("x", [2, 3, 4])], [vi("y", None)], opset=9)
    check(p, f32(2, 3, 4))


def test_opset7_and_11_and_21_are_accepted(tmp_path):
    for opset in (7, 11, 21):
        nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
        p = save(tmp_path, f"o{opset}", nodes, [vi("x", [2, 3])], [vi("y", None)], opset=opset)
        x = f32(2, 3)
        np.testing.assert_allclose(spora_run(p, x)[0], np.maximum(2 * x, 0))


def test_an_unsupported_op_names_node_op_and_opset(tmp_path):
    nodes = [helper.make_node("Hardmax", ["x"], ["y"], name="hm")]
    p = save(tmp_path, "hardmax", nodes, [vi("x", [2, 3])], [vi("y", None)], opset=12)
    with pytest.raises(ValueError, match=r"node 'hm' \(Hardmax, opset 12\).*not supported"):
        spora.load(str(p))
    p = save(tmp_path, "old", nodes, [vi("x", [2, 3])], [vi("y", None)], opset=6)
    with pytest.raises(ValueError, match="opset 6 is not supported"):
        spora.load(str(p))


# -- ops ---------------------------------------------------------------------------------

X = f32(2, 3, 4, 5)
OPS = {
    "variadic": ([helper.make_node("Sum", ["x", "x", "b"], ["s"]), helper.make_node("Mean", ["x", "b"], ["m"]),
                  helper.make_node("Max", ["x", "b", "m"], ["mx"]), helper.make_node("Min", ["s", "mx"], ["y"])],
                 {"b": f32(4, 5)}),
    "clip": ([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
             {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}),
    "lrn": ([helper.make_node("LRN", ["x"], ["y"], size=3, alpha=1e-2, beta=0.75, bias=2.0)], {}),
    "global_pools": ([helper.make_node("GlobalMaxPool", ["x"], ["a"]), helper.make_node("GlobalAveragePool", ["x"], ["b"]),
                      helper.make_node("Add", ["a", "b"], ["y"])], {}),
    "layer_norm": ([helper.make_node("LayerNormalization", ["x", "g", "be"], ["y"], axis=-2, epsilon=1e-5)],
                   {"g": f32(4, 5), "be": f32(4, 5)}),
    "where_expand_tile": ([helper.make_node("Greater", ["x", "zero"], ["c"]),
                           helper.make_node("Expand", ["b", "shp"], ["e"]),
                           helper.make_node("Where", ["c", "x", "e"], ["w"]),
                           helper.make_node("Tile", ["w", "reps"], ["y"])],
                          {"zero": np.array(0, np.float32), "b": f32(1, 5), "shp": np.array([3, 1, 1], np.int64),
                           "reps": np.array([1, 2, 1, 1], np.int64)}),
    "pow_sqrt_erf": ([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Sqrt", ["a"], ["s"]),
                      helper.make_node("Pow", ["s", "three"], ["p"]), helper.make_node("Erf", ["p"], ["y"])],
                     {"three": np.array(3, np.float32)}),
    "einsum": ([helper.make_node("Einsum", ["x", "k"], ["y"], equation="bhqd,bhkd->bhqk")], {"k": f32(2, 3, 6, 5)}),
    "einsum_t": ([helper.make_node("Einsum", ["x", "k"], ["y"], equation="bhdq,bhdk->bhqk")], {"k": f32(2, 3, 4, 6)}),
    "cast_split_pad": ([helper.make_node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
                        helper.make_node("Cast", ["d"], ["f"], to=F),
                        helper.make_node("Split", ["f", "sizes"], ["s0", "s1"], axis=3),
                        helper.make_node("Pad", ["s1", "pads", "cv"], ["y"], mode="constant")],
                       {"sizes": np.array([2, 3], np.int64), "pads": np.array([0, 0, 1, 1, 0, 1, 0, 2], np.int64),
                        "cv": np.array(1.5, np.float32)}),
    "reduce": ([helper.make_node("ReduceMean", ["x"], ["a"], axes=[1, 3], keepdims=1),
                helper.make_node("ReduceSum", ["x", "ax"], ["b"], keepdims=1),
                helper.make_node("ReduceMax", ["x"], ["c"], axes=[1, 3], keepdims=1),
                helper.make_node("ReduceL2", ["x"], ["d"], axes=[1, 3], keepdims=1),
                helper.make_node("Sum", ["a", "b", "c", "d"], ["y"])], {"ax": np.array([1, 3], np.int64)}),
    "argmax": ([helper.make_node("ArgMax", ["x"], ["y"], axis=2, keepdims=0)], {}),
    "prelu_hardsigmoid": ([helper.make_node("PRelu", ["x", "sl"], ["a"]), helper.make_node("HardSigmoid", ["a"], ["y"])],
                          {"sl": f32(5)}),
    "instance_norm": ([helper.make_node("InstanceNormalization", ["x", "g", "b"], ["y"])], {"g": f32(3), "b": f32(3)}),
}


@pytest.mark.parametrize("case", sorted(OPS))
def test_op_matches_onnxruntime(tmp_path, case):
    nodes, inits = OPS[case]
    opset = 12 if case == "einsum_t" else 17
    out_type = TensorProto.INT64 if case == "argmax" else F
    p = save(tmp_path, case, nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None, out_type)],
             [init(k, v) for k, v in inits.items()], opset=opset)
    check(p, X)


# Ops on other shapes than X: (nodes, inputs as (name, array), initializers,
# output element type, opset).
def _topk_nodes():
    return [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0),
            helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Add", ["v", "fi"], ["y"])]


OPS_SHAPED = {
    "conv1d": ([helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 2], dilations=[2], group=2)],
               [("x", f32(2, 4, 11))], {"w": f32(6, 2, 3), "b": f32(6)}, F, 17),
    "conv1d_same": ([helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2])],
                    [("x", f32(2, 4, 11))], {"w": f32(3, 4, 4)}, F, 17),
    "pool1d": ([helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3], strides=[2], pads=[1, 1]),
                helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2], strides=[1], pads=[0, 1])],
               [("x", f32(2, 3, 10))], {}, F, 17),
    "conv_transpose": ([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 3], pads=[1, 0, 0, 2],
                                         output_padding=[1, 0], group=2)],
                       [("x", f32(2, 4, 5, 6))], {"w": f32(4, 3, 3, 4), "b": f32(6)}, F, 17),
    "conv_transpose1d": ([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], dilations=[2])],
                         [("x", f32(2, 4, 7))], {"w": f32(4, 5, 3)}, F, 17),
    "topk": (_topk_nodes(), [("x", f32(3, 7, 2))], {"k": np.array([3], np.int64)}, F, 17),
    "topk_opset9": ([helper.make_node("TopK", ["x"], ["y", "i"], axis=-1, k=2)], [("x", f32(3, 5))], {}, F, 9),
    "cumsum": ([helper.make_node("CumSum", ["x", "ax"], ["c"], exclusive=1),
                helper.make_node("CumSum", ["c", "ax0"], ["y"], reverse=1)],
               [("x", f32(3, 5))], {"ax": np.array(1, np.int64), "ax0": np.array([0], np.int64)}, F, 17),
    "gather_elements": ([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
                        [("x", f32(3, 4))], {"i": np.array([[0, 3], [-1, 1], [2, 2]], np.int64)}, F, 17),
    "gather_nd": ([helper.make_node("GatherND", ["x", "i"], ["y"])],
                  [("x", f32(3, 4, 2))], {"i": np.array([[0, 1], [2, 3], [1, -1]], np.int64)}, F, 17),
    "one_hot": ([helper.make_node("OneHot", ["x", "d", "v"], ["y"])],
                [("x", np.array([[0, 2], [4, -1]], np.int64))],
                {"d": np.array(5, np.int64), "v": np.array([0.5, 2.0], np.float32)}, F, 17),
}


@pytest.mark.parametrize("case", sorted(OPS_SHAPED))
def test_shaped_op_matches_onnxruntime(tmp_path, case):
    nodes, xs, inits, out_type, opset = OPS_SHAPED[case]
    ins = [vi(n, list(a.shape), helper.np_dtype_to_tensor_dtype(a.dtype)) for n, a in xs]
    p = save(tmp_path, case, nodes, ins, [vi("y", None, out_type)], [init(k, v) for k, v in inits.items()],
             opset=opset)
    check(p, *[a for _, a in xs])


def test_3d_convolution_and_pooling_are_refused_by_name(tmp_path):
    for op, ins, attrs, inits in (("Conv", ["x", "w"], {}, [init("w", f32(2, 3, 1, 1, 1))]),
                                  ("MaxPool", ["x"], {"kernel_shape": [2, 2, 2]}, []),
                                  ("ConvTranspose", ["x", "w"], {}, [init("w", f32(3, 2, 1, 1, 1))])):
        nodes = [helper.make_node(op, ins, ["y"], name="n3d", **attrs)]
        p = save(tmp_path, f"{op}3d", nodes, [vi("x", [1, 3, 4, 4, 4])], [vi("y", None)], inits)
        with pytest.raises(ValueError, match=rf"node 'n3d' \({op}, opset 17\): 3-D convolution and pooling"):
            spora.load(str(p))


def test_gelu_at_opset_20(tmp_path):
    p = save(tmp_path, "gelu", [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], [vi("x", [2, 3])],
             [vi("y", None)], opset=20)
    x = f32(2, 3)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(spora_run(p, x)[0], want, rtol=1e-5, atol=1e-6)


# -- whole models ----------------------------------------------------------------------


def conv_bn_relu(nodes, inits, x, y, cin, cout, k, stride=1, pad=0, relu=True):
    inits += [init(f"{y}_w", f32(cout, cin, k, k, scale=1.0 / np.sqrt(cin * k * k))), init(f"{y}_b", f32(cout) * 0.1),
              init(f"{y}_g", 1 + 0.1 * f32(cout)), init(f"{y}_be", 0.1 * f32(cout)), init(f"{y}_m", 0.1 * f32(cout)),
              init(f"{y}_v", (1 + 0.1 * np.abs(f32(cout))).astype(np.float32))]
    nodes += [helper.make_node("Conv", [x, f"{y}_w", f"{y}_b"], [f"{y}_c"], kernel_shape=[k, k], strides=[stride] * 2,
                               pads=[pad] * 4),
              helper.make_node("BatchNormalization", [f"{y}_c", f"{y}_g", f"{y}_be", f"{y}_m", f"{y}_v"],
                               [f"{y}_n" if relu else y])]
    if relu:
        nodes.append(helper.make_node("Relu", [f"{y}_n"], [y]))


def test_zoo_style_cnn_at_opset_9(tmp_path):
    # AlexNet/GoogLeNet-style: conv, LRN, pooling, an inception-like
    # Concat, Dropout, Gemm, Softmax; the classifier's bias is built by a
    # constant subgraph (ConstantOfShape + Shape), as zoo files do.
    nodes, inits = [], []
    conv_bn_relu(nodes, inits, "x", "c1", 3, 8, 3, pad=1)
    nodes += [helper.make_node("LRN", ["c1"], ["l1"], size=5, alpha=1e-4, beta=0.75, bias=1.0),
              helper.make_node("MaxPool", ["l1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2])]
    conv_bn_relu(nodes, inits, "p1", "b1", 8, 4, 1)
    conv_bn_relu(nodes, inits, "p1", "b3", 8, 4, 3, pad=1)
    nodes += [helper.make_node("Concat", ["b1", "b3"], ["cat"], axis=1),
              helper.make_node("AveragePool", ["cat"], ["p2"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
              helper.make_node("GlobalAveragePool", ["p2"], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
              helper.make_node("Dropout", ["flat"], ["drop", "mask"], ratio=0.4),
              helper.make_node("Shape", ["fc_w"], ["fc_shape"]),
              helper.make_node("Slice", ["fc_shape"], ["nclass"], starts=[0], ends=[1]),
              helper.make_node("ConstantOfShape", ["nclass"], ["fc_b"],
                               value=helper.make_tensor("v", F, [1], [0.05])),
              helper.make_node("Gemm", ["drop", "fc_w", "fc_b"], ["logits"], transB=1),
              helper.make_node("Softmax", ["logits"], ["y"], axis=1)]
    inits.append(init("fc_w", f32(10, 8)))
    p = save(tmp_path, "zoo_cnn", nodes, [vi("x", ["N", 3, 16, 16])], [vi("y", None)], inits, opset=9)
    for b in (1, 3):
        check(p, f32(b, 3, 16, 16))


def test_resnet_style_net(tmp_path):
    nodes, inits = [], []
    conv_bn_relu(nodes, inits, "x", "stem", 3, 8, 3, stride=2, pad=1)
    nodes.append(helper.make_node("MaxPool", ["stem"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x = "p"
    for i, (cin, cout, stride) in enumerate([(8, 8, 1), (8, 16, 2)]):
        conv_bn_relu(nodes, inits, x, f"r{i}a", cin, cout, 3, stride, 1)
        conv_bn_relu(nodes, inits, f"r{i}a", f"r{i}b", cout, cout, 3, 1, 1, relu=False)
        short = x
        if stride != 1 or cin != cout:
            conv_bn_relu(nodes, inits, x, f"r{i}s", cin, cout, 1, stride, 0, relu=False)
            short = f"r{i}s"
        nodes += [helper.make_node("Add", [f"r{i}b", short], [f"r{i}sum"]),
                  helper.make_node("Relu", [f"r{i}sum"], [f"r{i}"])]
        x = f"r{i}"
    inits += [init("fc_w", f32(16, 5)), init("fc_b", f32(5))]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"])]
    p = save(tmp_path, "resnet", nodes, [vi("x", ["N", 3, 32, 32])], [vi("y", None)], inits, opset=13)
    for b in (2, 4):
        check(p, f32(b, 3, 32, 32))


def bert_layer(nodes, inits, x, y, hidden, heads, ffn, mask):
    """One post-norm encoder layer as torch.onnx.export writes it: shapes
    from Shape/Gather/Unsqueeze/Concat, heads split by Reshape + Transpose."""
    hd = hidden // heads
    s = 1.0 / np.sqrt(hidden)
    for n in ("q", "k", "v", "o"):
        inits += [init(f"{y}_{n}w", f32(hidden, hidden, scale=s)), init(f"{y}_{n}b", f32(hidden, scale=0.1))]
    inits += [init(f"{y}_f1w", f32(hidden, ffn, scale=s)), init(f"{y}_f1b", f32(ffn, scale=0.1)),
              init(f"{y}_f2w", f32(ffn, hidden, scale=1 / np.sqrt(ffn))), init(f"{y}_f2b", f32(hidden, scale=0.1)),
              init(f"{y}_g1", 1 + 0.1 * f32(hidden)), init(f"{y}_be1", 0.1 * f32(hidden)),
              init(f"{y}_g2", 1 + 0.1 * f32(hidden)), init(f"{y}_be2", 0.1 * f32(hidden))]
    nodes += [helper.make_node("Shape", [x], [f"{y}_shape"]),
              helper.make_node("Gather", [f"{y}_shape", "i0"], [f"{y}_B"], axis=0),
              helper.make_node("Gather", [f"{y}_shape", "i1"], [f"{y}_S"], axis=0),
              helper.make_node("Unsqueeze", [f"{y}_B", "ax0"], [f"{y}_B1"]),
              helper.make_node("Unsqueeze", [f"{y}_S", "ax0"], [f"{y}_S1"]),
              helper.make_node("Concat", [f"{y}_B1", f"{y}_S1", "heads", "hd"], [f"{y}_split_shape"], axis=0),
              helper.make_node("Concat", [f"{y}_B1", f"{y}_S1", "hidden"], [f"{y}_merge_shape"], axis=0)]
    for n in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", [x, f"{y}_{n}w"], [f"{y}_{n}m"]),
                  helper.make_node("Add", [f"{y}_{n}m", f"{y}_{n}b"], [f"{y}_{n}a"]),
                  helper.make_node("Reshape", [f"{y}_{n}a", f"{y}_split_shape"], [f"{y}_{n}r"]),
                  helper.make_node("Transpose", [f"{y}_{n}r"], [f"{y}_{n}t"],
                                   perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", [f"{y}_qt", f"{y}_kt"], [f"{y}_sc"]),
              # the scale from the head size, as exporters compute it: sqrt(Shape(q)[-1])
              helper.make_node("Shape", [f"{y}_qt"], [f"{y}_qs"]),
              helper.make_node("Gather", [f"{y}_qs", "im1"], [f"{y}_hd"], axis=0),
              helper.make_node("Cast", [f"{y}_hd"], [f"{y}_hdf"], to=F),
              helper.make_node("Sqrt", [f"{y}_hdf"], [f"{y}_sq"]),
              helper.make_node("Div", [f"{y}_sc", f"{y}_sq"], [f"{y}_scs"]),
              helper.make_node("Add", [f"{y}_scs", mask], [f"{y}_scm"]),
              helper.make_node("Softmax", [f"{y}_scm"], [f"{y}_p"], axis=-1),
              helper.make_node("MatMul", [f"{y}_p", f"{y}_vt"], [f"{y}_ctx"]),
              helper.make_node("Transpose", [f"{y}_ctx"], [f"{y}_ctxt"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", [f"{y}_ctxt", f"{y}_merge_shape"], [f"{y}_ctxm"]),
              helper.make_node("MatMul", [f"{y}_ctxm", f"{y}_ow"], [f"{y}_om"]),
              helper.make_node("Add", [f"{y}_om", f"{y}_ob"], [f"{y}_oa"]),
              helper.make_node("Add", [f"{y}_oa", x], [f"{y}_r1"]),
              helper.make_node("LayerNormalization", [f"{y}_r1", f"{y}_g1", f"{y}_be1"], [f"{y}_n1"], axis=-1,
                               epsilon=1e-12),
              helper.make_node("MatMul", [f"{y}_n1", f"{y}_f1w"], [f"{y}_f1m"]),
              helper.make_node("Add", [f"{y}_f1m", f"{y}_f1b"], [f"{y}_f1a"]),
              # GELU, erf form, as exported before opset 20
              helper.make_node("Div", [f"{y}_f1a", "sqrt2"], [f"{y}_gd"]),
              helper.make_node("Erf", [f"{y}_gd"], [f"{y}_ge"]),
              helper.make_node("Add", [f"{y}_ge", "one"], [f"{y}_g1p"]),
              helper.make_node("Mul", [f"{y}_f1a", f"{y}_g1p"], [f"{y}_gm"]),
              helper.make_node("Mul", [f"{y}_gm", "half"], [f"{y}_gelu"]),
              helper.make_node("MatMul", [f"{y}_gelu", f"{y}_f2w"], [f"{y}_f2m"]),
              helper.make_node("Add", [f"{y}_f2m", f"{y}_f2b"], [f"{y}_f2a"]),
              helper.make_node("Add", [f"{y}_f2a", f"{y}_n1"], [f"{y}_r2"]),
              helper.make_node("LayerNormalization", [f"{y}_r2", f"{y}_g2", f"{y}_be2"], [y], axis=-1,
                               epsilon=1e-12)]


def test_bert_style_encoder_with_dynamic_batch_and_sequence(tmp_path):
    hidden, heads, ffn = 16, 4, 32
    nodes = [  # the additive mask (B, 1, 1, S) from a (B, S) 0/1 int64 mask
        helper.make_node("Unsqueeze", ["attention_mask", "ax12"], ["m4"]),
        helper.make_node("Cast", ["m4"], ["mf"], to=F),
        helper.make_node("Sub", ["one", "mf"], ["inv"]),
        helper.make_node("Mul", ["inv", "neg_big"], ["mask"]),
    ]
    inits = [init("i0", np.array(0, np.int64)), init("i1", np.array(1, np.int64)),
             init("im1", np.array(-1, np.int64)), init("ax0", np.array([0], np.int64)),
             init("ax12", np.array([1, 2], np.int64)), init("heads", np.array([heads], np.int64)),
             init("hd", np.array([hidden // heads], np.int64)), init("hidden", np.array([hidden], np.int64)),
             init("one", np.array(1, np.float32)), init("half", np.array(0.5, np.float32)),
             init("sqrt2", np.array(np.sqrt(2), np.float32)), init("neg_big", np.array(-10000, np.float32))]
    bert_layer(nodes, inits, "x", "l0", hidden, heads, ffn, "mask")
    bert_layer(nodes, inits, "l0", "y", hidden, heads, ffn, "mask")
    p = save(tmp_path, "bert", nodes,
             [vi("x", ["batch", "seq", hidden]), vi("attention_mask", ["batch", "seq"], TensorProto.INT64)],
             [vi("y", ["batch", "seq", hidden])], inits, opset=17)
    for b, s in ((2, 5), (1, 7), (3, 3)):
        mask = np.ones((b, s), np.int64)
        mask[0, -1] = 0
        check(p, f32(b, s, hidden), mask)


def test_a_huge_constant_of_shape_is_not_built_at_import(tmp_path):
    # 2^40 elements claimed by a few bytes: folding stops at its limit and
    # the node becomes Spora's full, which nothing allocates while importing.
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"], value=helper.make_tensor("v", F, [1], [1.0])),
             helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
             helper.make_node("Add", ["x", "s"], ["y"])]
    p = save(tmp_path, "huge", nodes, [vi("x", [2])], [vi("y", None)],
             [init("shape", np.array([1 << 20, 1 << 20], np.int64))])
    try:
        spora.load(str(p))
    except ValueError as e:  # refused by the op library: fine, as long as it names the node
        assert "ConstantOfShape" in str(e) or "full" in str(e)
