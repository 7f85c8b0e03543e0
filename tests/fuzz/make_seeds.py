"""Seed corpora for the fuzz targets (tests/fuzz/corpus/<target>/), made the
way the test suite makes these files: a checkpoint and an exported model
through the Python frontend (the build tree's `spora` package), ONNX models
from the tests' own protobuf writer (tests/python/frontend/onnx_writer.py),
IDX and .npy files as MNIST and NumPy write them, and the graph JSON that
the exported models hold. Seeds are kept small (a few KiB each): the
fuzzer's mutations matter, not the files' size.

    PYTHONPATH=build/python SPORA_LIB=build/lib/libspora.so \\
        .venv/bin/python tests/fuzz/make_seeds.py tests/fuzz/corpus
"""
import gzip
import io
import json
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "frontend"))


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def idx_bytes(arr, code):
    head = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", n) for n in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def idx_seeds(out):
    rng = np.random.default_rng(0)
    seeds = {
        "images-u8": idx_bytes(rng.integers(0, 255, (3, 4, 4), dtype=np.uint8), 0x08),
        "labels-u8": idx_bytes(np.arange(5, dtype=np.uint8), 0x08),
        "i8": idx_bytes(np.array([-3, 0, 7], np.int8), 0x09),
        "i16": idx_bytes(np.array([[-300, 2], [5, 6]], np.int16), 0x0B),
        "i32": idx_bytes(np.array([1 << 20, -1], np.int32), 0x0C),
        "f32": idx_bytes(np.array([[0.5, -1.25]], np.float32), 0x0D),
        "f64": idx_bytes(np.array([3.0, 1e-300], np.float64), 0x0E),
    }
    for name, data in seeds.items():
        put(out, "idx", name, data)
        put(out, "idx_gz", name, data)  # the target gzips its input itself
        put(out, "idx_gz", name + ".gz", gzip.compress(data, mtime=0))  # and reads it raw


def npy_seeds(out):
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f64-scalar": np.array(2.5),
        "f16": np.ones((2, 2), np.float16),
        "i32": np.array([1, -2, 3], np.int32),
        "i64": np.arange(4, dtype=np.int64).reshape(1, 2, 2),
        "u8": np.array([0, 255], np.uint8),
        "bool": np.array([True, False]),
        "empty": np.zeros((0, 3), np.float32),
    }
    for name, a in arrays.items():
        buf = io.BytesIO()
        np.save(buf, a)
        put(out, "npy", name + ".npy", buf.getvalue())
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3, dtype=np.float32), version=(2, 0))
    put(out, "npy", "v2.npy", buf.getvalue())


def onnx_seeds(out):
    from onnx_writer import FLOAT, graph, model, node, tensor, value_info

    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    mlp = graph([node("Gemm", ["x", "w", "b"], ["h"]), node("Relu", ["h"], ["r"]),
                 node("Softmax", ["r"], ["y"], axis=1)],
                inputs=[value_info("x", FLOAT, [2, 4])], outputs=[value_info("y", FLOAT, [2, 3])],
                initializers=[tensor("w", w), tensor("b", b, mode="typed")])
    put(out, "onnx", "mlp.onnx", model(mlp, opset=17))
    k = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    cnn = graph([node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]), node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2],
                 strides=[2, 2]), node("Flatten", ["p"], ["y"])],
                inputs=[value_info("x", FLOAT, [1, 1, 4, 4])], outputs=[value_info("y", FLOAT, [1, 8])],
                initializers=[tensor("k", k)])
    put(out, "onnx", "cnn.onnx", model(cnn, opset=13))
    shape = np.array([3, 2], np.int64)
    rs = graph([node("Reshape", ["x", "s"], ["r"]), node("Transpose", ["r"], ["t"], perm=[1, 0]),
                node("Add", ["t", "t"], ["y"])],
               inputs=[value_info("x", FLOAT, [2, 3])], outputs=[value_info("y", FLOAT, [2, 3])],
               initializers=[tensor("s", shape, mode="typed")])
    put(out, "onnx", "reshape.onnx", model(rs, opset=20))


def frontend_seeds(out):
    import spora
    from spora import nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, pad_mode="valid", has_bias=True)
            self.flat = nn.Flatten()
            self.fc = nn.Dense(2 * 2 * 2, 3)

        def construct(self, x):
            return nn.Softmax()(self.fc(self.flat(nn.ReLU()(self.conv(x)))))

    nn.init.set_seed(0)
    net = Net()
    net.set_train(False)
    x = spora.Tensor(np.ones((1, 1, 4, 4), np.float32))
    with tempfile.TemporaryDirectory() as tmp:
        spora.save_checkpoint(net, os.path.join(tmp, "net.ckpt"), metadata={"epoch": "3"})
        spora.save_checkpoint({"a": np.arange(4, dtype=np.int64), "b": np.ones((2, 2), np.float16),
                               "c": np.array([True, False])}, os.path.join(tmp, "dict.ckpt"))
        model = spora.export(net, x, file_name=os.path.join(tmp, "net.spora"))
        for name in ("net.ckpt", "dict.ckpt"):
            with open(os.path.join(tmp, name), "rb") as f:
                put(out, "checkpoint", name, f.read())
        with open(model, "rb") as f:
            data = f.read()
    put(out, "model", "net.spora", data)
    # A model file is also a checkpoint-shaped safetensors file.
    put(out, "checkpoint", "net.spora", data)
    n = struct.unpack("<Q", data[:8])[0]
    graph_json = json.loads(data[8:8 + n])["__metadata__"]["spora.graph"].encode()
    for target in ("graph_json", "graph_compile"):
        put(out, target, "net.json", graph_json)
    small = small_graph_json(spora)
    for target in ("graph_json", "graph_compile"):
        put(out, target, "fn.json", small)


def small_graph_json(spora):
    """A traced function with a dead op, a duplicate and a constant
    expression (work for every level-1 pass), and a reduction."""
    from spora import ops
    from spora._jit import JitFunction

    def f(x, y):
        unused = ops.exp(x)  # noqa: F841 (dead)
        a = ops.tanh(x) * 2.0
        b = ops.tanh(x) * 2.0
        return ops.softmax(a + b + y, -1).sum()

    fn = JitFunction(f)
    fn(spora.Tensor(np.ones((2, 3), np.float32)), spora.Tensor(np.zeros((1, 3), np.float32)))
    return fn.last_graph.json().encode()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    idx_seeds(out)
    npy_seeds(out)
    onnx_seeds(out)
    frontend_seeds(out)


if __name__ == "__main__":
    main()
