"""A small ONNX model writer for tests: protobuf wire format by hand, from
the public field numbers of the ONNX IR, independent of the importer in
core/src/io (and of the `onnx` package, which the tests use too when it is
installed). Only what the tests need.

    g = graph([node("Relu", ["x"], ["y"])], inputs=[value_info("x", FLOAT, [2, 3])],
              outputs=[value_info("y", FLOAT, [2, 3])])
    open("m.onnx", "wb").write(model(g, opset=17))
"""
import struct

import numpy as np

FLOAT, UINT8, INT8, INT32, INT64, BOOL, FLOAT16, DOUBLE = 1, 2, 3, 6, 7, 9, 10, 11
_NP = {np.float32: FLOAT, np.float64: DOUBLE, np.int64: INT64, np.int32: INT32, np.uint8: UINT8,
       np.bool_: BOOL, np.float16: FLOAT16, np.int8: INT8}


def varint(v):
    v &= (1 << 64) - 1  # negative ints: two's complement, 10 bytes
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def f_varint(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def f_float(field, v):
    return key(field, 5) + struct.pack("<f", v)


def tensor(name, arr, mode="raw"):
    """TensorProto of a numpy array: raw_data, or the typed field ("typed"),
    or "external" with `mode=("external", location, offset)`."""
    arr = np.asarray(arr)
    dt = _NP[arr.dtype.type]
    out = b"".join(f_varint(1, d) for d in arr.shape) + f_varint(2, dt) + f_bytes(8, name)
    if mode == "raw":
        out += f_bytes(9, np.ascontiguousarray(arr).tobytes())
    elif mode == "typed":
        flat = arr.reshape(-1)
        if dt == FLOAT:
            out += f_bytes(4, flat.astype("<f4").tobytes())  # packed
        elif dt == DOUBLE:
            out += f_bytes(10, flat.astype("<f8").tobytes())
        elif dt == INT64:
            out += f_bytes(7, b"".join(varint(int(v)) for v in flat))
        elif dt == FLOAT16:
            out += f_bytes(5, b"".join(varint(int(v)) for v in flat.view(np.uint16)))
        else:  # int32, uint8, int8, bool
            out += b"".join(f_varint(5, int(v)) for v in flat)  # unpacked, one per tag
    else:
        _, location, offset = mode
        out += f_varint(14, 1)
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(arr.nbytes))):
            out += f_bytes(13, f_bytes(1, k) + f_bytes(2, v))
    return out


def attr(name, value):
    out = f_bytes(1, name)
    if isinstance(value, bool) or isinstance(value, (int, np.integer)):
        return out + f_varint(20, 2) + f_varint(3, int(value))
    if isinstance(value, float):
        return out + f_varint(20, 1) + f_float(2, value)
    if isinstance(value, str):
        return out + f_varint(20, 3) + f_bytes(4, value)
    if isinstance(value, bytes):  # an encoded TensorProto
        return out + f_varint(20, 4) + f_bytes(5, value)
    value = list(value)
    if value and isinstance(value[0], float):
        return out + f_varint(20, 6) + b"".join(f_float(7, v) for v in value)
    return out + f_varint(20, 7) + b"".join(f_varint(8, v) for v in value)


def node(op, inputs, outputs, name="", **attrs):
    out = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    out += f_bytes(3, name or f"{op}_{outputs[0]}") + f_bytes(4, op)
    out += b"".join(f_bytes(5, attr(k, v)) for k, v in attrs.items())
    return out


def value_info(name, elem_type, dims):
    shape = b"".join(f_bytes(1, f_bytes(2, d) if isinstance(d, str) else f_varint(1, d)) for d in dims)
    tensor_type = f_varint(1, elem_type) + f_bytes(2, shape)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def graph(nodes, inputs, outputs, initializers=(), name="g"):
    out = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    out += b"".join(f_bytes(5, t) for t in initializers)
    out += b"".join(f_bytes(11, v) for v in inputs) + b"".join(f_bytes(12, v) for v in outputs)
    return out


def model(g, opset=17, ir_version=8):
    return (f_varint(1, ir_version) + f_bytes(2, "spora-tests") + f_bytes(7, g)
            + f_bytes(8, f_bytes(1, "") + f_varint(2, opset)))
