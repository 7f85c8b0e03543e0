"""Seed corpora for the fuzz targets (tests/fuzz/corpus/<target>/), made the
way the test suite makes these files: a checkpoint and an exported model
through the Python frontend (the build tree's `spora` package), ONNX models
from the tests' own protobuf writer (tests/python/frontend/onnx_writer.py),
IDX and .npy files as MNIST and NumPy write them, the graph JSON that the
exported models hold, and small JPEG and PNG images (the JPEGs need
Pillow). Seeds are kept small (a few KiB each): the fuzzer's mutations
matter, not the files' size.

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
    from onnx_writer import FLOAT, INT64, graph, model, node, tensor, value_info

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
    # dynamic batch and sequence: position ids by Range and by a Slice up to
    # the sequence length (kept symbolic), a 1-D Conv, TopK
    consts = {"one": 1, "zero": 0, "i0": [0], "i1": [1], "i2": [2], "k": [1]}
    dyn = graph([node("Shape", ["ids"], ["s"]), node("Gather", ["s", "one"], ["n"], axis=0),
                 node("Range", ["zero", "n", "one"], ["r"]), node("Gather", ["pos", "r"], ["pe"], axis=0),
                 node("Slice", ["s", "i1", "i2"], ["n1"]), node("Slice", ["pos", "i0", "n1", "i0"], ["pe2"]),
                 node("Gather", ["tok", "ids"], ["te"], axis=0), node("Add", ["te", "pe"], ["a"]),
                 node("Add", ["a", "pe2"], ["b"]), node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]),
                 node("Conv", ["bt", "w"], ["c"]), node("TopK", ["c", "k"], ["y", "yi"], axis=1)],
                inputs=[value_info("ids", INT64, ["batch", "seq"])], outputs=[value_info("y", FLOAT, ["batch", 1, "seq"])],
                initializers=[tensor(n, np.array(v, np.int64), mode="typed") for n, v in consts.items()]
                + [tensor("pos", rng.standard_normal((8, 4)).astype(np.float32)),
                   tensor("tok", rng.standard_normal((5, 4)).astype(np.float32)),
                   tensor("w", rng.standard_normal((2, 4, 1)).astype(np.float32))])
    put(out, "onnx", "dynamic_range.onnx", model(dyn, opset=17))


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


def png_bytes(w, h, ctype, depth, samples, interlace=False, extra=()):
    """A PNG written chunk by chunk (zlib for IDAT), as the decoder's unit
    test does: `samples` is a function (x, y, channel) -> sample value."""
    import zlib
    chans = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    def row(xs, y):
        bits = []
        for x in xs:
            for c in range(chans):
                bits.append(samples(x, y, c) & ((1 << depth) - 1))
        if depth == 16:
            return b"\0" + b"".join(struct.pack(">H", v) for v in bits)
        if depth == 8:
            return b"\0" + bytes(bits)
        per = 8 // depth
        out = bytearray()
        for i in range(0, len(bits), per):
            byte = 0
            for j, v in enumerate(bits[i:i + per]):
                byte |= v << (8 - depth * (j + 1))
            out.append(byte)
        return b"\0" + bytes(out)

    if interlace:  # Adam7: seven passes, each a sub-image of its own
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b""
        for x0, y0, dx, dy in passes:
            xs = list(range(x0, w, dx))
            if xs:
                raw += b"".join(row(xs, y) for y in range(y0, h, dy))
    else:
        raw = b"".join(row(range(w), y) for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    body = chunk(b"IHDR", ihdr) + b"".join(chunk(k, d) for k, d in extra)
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def image_seeds(out):
    """JPEG and PNG images of every layout the decoder meets: PNGs written
    here (every colour type and bit depth, palette with transparency,
    Adam7), JPEGs through Pillow when it is installed (baseline grey and
    RGB, 4:2:0, progressive, restart markers, CMYK, which the decoder
    refuses), small: 5x3 to 16x16 pixels."""
    def grad(x, y, c):
        return (x * 37 + y * 91 + c * 53) * 257

    pal = b"".join(bytes([i * 60, 255 - i * 60, (i * 97) % 256]) for i in range(4))
    pngs = {
        "grey1.png": png_bytes(5, 3, 0, 1, lambda x, y, c: x ^ y),
        "grey4.png": png_bytes(5, 3, 0, 4, lambda x, y, c: x + 4 * y),
        "grey8.png": png_bytes(5, 3, 0, 8, lambda x, y, c: x * 40 + y, extra=[(b"gAMA", struct.pack(">I", 45455))]),
        "grey16.png": png_bytes(5, 3, 0, 16, grad),
        "grey-alpha8.png": png_bytes(5, 3, 4, 8, lambda x, y, c: x * 50 if c == 0 else y * 120),
        "rgb8.png": png_bytes(5, 3, 2, 8, lambda x, y, c: grad(x, y, c) >> 8),
        "rgb16.png": png_bytes(4, 4, 2, 16, grad, extra=[(b"sRGB", b"\0")]),
        "rgb8-trns.png": png_bytes(4, 2, 2, 8, lambda x, y, c: x * 60, extra=[(b"tRNS", struct.pack(">HHH", 60, 60, 60))]),
        "rgba8.png": png_bytes(4, 3, 6, 8, lambda x, y, c: 255 - x * 60 if c == 3 else grad(x, y, c) >> 8),
        "rgba16.png": png_bytes(3, 2, 6, 16, grad),
        "palette2.png": png_bytes(5, 3, 3, 2, lambda x, y, c: (x + y) % 4,
                                  extra=[(b"PLTE", pal), (b"tRNS", bytes([255, 128, 0]))]),
        "palette8-interlaced.png": png_bytes(9, 9, 3, 8, lambda x, y, c: (x * y) % 4, interlace=True,
                                             extra=[(b"PLTE", pal)]),
        "rgb8-interlaced.png": png_bytes(9, 9, 2, 8, lambda x, y, c: grad(x, y, c) >> 8, interlace=True),
    }
    for name, data in pngs.items():
        put(out, "image", name, data)
    try:
        from PIL import Image
    except ImportError:
        print("make_seeds.py: no Pillow; the JPEG seeds of corpus/image were not remade", file=sys.stderr)
        return
    rgb = np.zeros((16, 16, 3), np.uint8)
    rgb[..., 0] = np.arange(16)[:, None] * 16
    rgb[..., 1] = np.arange(16)[None, :] * 16
    rgb[..., 2] = 128
    jpegs = {
        "grey.jpg": (Image.fromarray(rgb[..., 0]), dict(quality=50)),
        "rgb444.jpg": (Image.fromarray(rgb), dict(quality=50, subsampling=0)),
        "rgb420.jpg": (Image.fromarray(rgb), dict(quality=50, subsampling=2, optimize=True)),
        "rgb-progressive.jpg": (Image.fromarray(rgb), dict(quality=50, progressive=True)),
        "grey-progressive.jpg": (Image.fromarray(rgb[..., 1]), dict(quality=50, progressive=True)),
        "rgb-restart.jpg": (Image.fromarray(rgb), dict(quality=50, restart_marker_blocks=1)),
        "cmyk.jpg": (Image.fromarray(rgb).convert("CMYK"), dict(quality=50)),
    }
    for name, (img, opts) in jpegs.items():
        buf = io.BytesIO()
        img.save(buf, "JPEG", **opts)
        put(out, "image", name, buf.getvalue())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    idx_seeds(out)
    npy_seeds(out)
    onnx_seeds(out)
    frontend_seeds(out)
    image_seeds(out)


if __name__ == "__main__":
    main()
