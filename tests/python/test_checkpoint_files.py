"""Checkpoint files from another language: files written through the C API
are safetensors files (read here by an independent reader that applies the
format's rules, and by the `safetensors` package when it is installed), and
safetensors files written by other tools read through the C API."""
import ctypes
import json
import struct

import numpy as np
import pytest

import spora_capi as sc

_vp, _cstr, _size, _i32, _i64, P = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int64, ctypes.POINTER
for _name, (_res, _args) in {
    "spora_checkpoint_save": (ctypes.c_int32, [_cstr, P(_cstr), P(_vp), _size, _cstr]),
    "spora_checkpoint_open": (ctypes.c_int32, [_cstr, P(_vp)]),
    "spora_checkpoint_close": (ctypes.c_int32, [_vp]),
    "spora_checkpoint_count": (ctypes.c_int32, [_vp, P(_size)]),
    "spora_checkpoint_entry": (ctypes.c_int32, [_vp, _size, P(_cstr), P(ctypes.c_int), P(_i64), _i32, P(_i32)]),
    "spora_checkpoint_metadata": (ctypes.c_int32, [_vp, P(_cstr)]),
    "spora_checkpoint_read": (ctypes.c_int32, [_vp, _cstr, _vp, P(_vp)]),
}.items():
    getattr(sc.lib, _name).restype = _res
    getattr(sc.lib, _name).argtypes = _args

_ST_NUMPY = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64,
             "U8": np.uint8, "BOOL": np.bool_, "BF16": np.uint16}  # bf16 compared as its bits


def read_safetensors(path):
    """An independent reader with the reference loader's rules: the header
    is JSON; tensors are contiguous from offset 0 and cover the data section
    exactly."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw)
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    assert raw[8:9] == b"{"
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    data = raw[8 + n:]
    spans = sorted((tuple(v["data_offsets"]), k) for k, v in header.items())
    at = 0
    for (b, e), k in spans:
        assert b == at, f"{k}: gap or overlap at {b}"
        at = e
    assert at == len(data), "tensors do not cover the data section"
    out = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        dt = np.dtype(_ST_NUMPY[v["dtype"]])
        out[k] = np.frombuffer(data[b:e], dtype=dt.newbyteorder("<")).reshape(v["shape"])
    return out, meta, 8 + n


def save(path, arrays, meta=None, raw=None):
    with sc.Context() as ctx:
        dev = ctx.device_find("cpu")
        tensors = [sc.Tensor.from_numpy(dev, a) for a in arrays.values()]
        for name, (dtype, shape, bits) in (raw or {}).items():
            tensors.append(sc.Tensor.create_raw(dev, dtype, shape, bits, bits.nbytes))
        names = list(arrays) + list(raw or {})
        c_names = (_cstr * len(names))(*[n.encode() for n in names])
        c_tensors = (_vp * len(tensors))(*[t.handle for t in tensors])
        sc.call("spora_checkpoint_save", str(path).encode(), c_names, c_tensors, len(names),
                json.dumps(meta).encode() if meta is not None else None)


def arrays_of_every_dtype():
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal((2, 2, 2)),
        "f16": rng.standard_normal((5,)).astype(np.float16),
        "i32": rng.integers(-1000, 1000, (4,)).astype(np.int32),
        "i64": rng.integers(-2**40, 2**40, (2, 3)),
        "u8": rng.integers(0, 255, (7,)).astype(np.uint8),
        "bool": rng.integers(0, 2, (3,)).astype(np.bool_),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float64),
    }


def test_written_files_are_safetensors(tmp_path):
    arrays = arrays_of_every_dtype()
    bf16_bits = np.array([0x3f80, 0xc000, 0x7fc0], dtype=np.uint16)  # 1, -2, nan
    save(tmp_path / "c.safetensors", arrays, {"epoch": "4"}, {"bf16": (sc.DTYPE_BF16, (3,), bf16_bits)})
    got, meta, data_start = read_safetensors(tmp_path / "c.safetensors")
    assert data_start % 64 == 0
    assert meta["epoch"] == "4" and meta["spora.format"] == "checkpoint"
    assert set(got) == set(arrays) | {"bf16"}
    for k, a in arrays.items():
        assert got[k].dtype == a.dtype and got[k].shape == a.shape, k
        np.testing.assert_array_equal(got[k], a)
    np.testing.assert_array_equal(got["bf16"], bf16_bits)


def test_the_safetensors_package_reads_them(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = arrays_of_every_dtype()
    save(tmp_path / "c.safetensors", arrays, {"epoch": "4"})
    got = st.load_file(str(tmp_path / "c.safetensors"))
    for k, a in arrays.items():
        np.testing.assert_array_equal(got[k], a)
    path = tmp_path / "from_package.safetensors"
    st.save_file({"w": arrays["f32"], "i": arrays["i64"]}, str(path), metadata={"format": "np"})
    assert np.array_equal(read_through_c_api(path, "w"), arrays["f32"])


def read_through_c_api(path, name):
    with sc.Context() as ctx:
        dev = ctx.device_find("cpu")
        h = _vp()
        sc.call("spora_checkpoint_open", str(path).encode(), ctypes.byref(h))
        try:
            t = _vp()
            sc.call("spora_checkpoint_read", h, name.encode(), dev.handle, ctypes.byref(t))
            return sc.Tensor(t.value).numpy()
        finally:
            sc.lib.spora_checkpoint_close(h)


def write_foreign(path, arrays, meta):
    """A safetensors file as another tool writes it: no Spora metadata, no
    alignment padding, header keys in insertion order."""
    header, blobs, at = {}, [], 0
    for k, a in arrays.items():
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[k] = {"dtype": {np.float32: "F32", np.int64: "I64", np.uint8: "U8"}[a.dtype.type],
                     "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def test_foreign_files_read_through_the_c_api(tmp_path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([-1, 2**40], dtype=np.int64),
              "c": np.array([1, 2, 3], dtype=np.uint8)}
    write_foreign(tmp_path / "f.safetensors", arrays, {"format": "pt"})
    for k, a in arrays.items():
        np.testing.assert_array_equal(read_through_c_api(tmp_path / "f.safetensors", k), a)
    with sc.Context():
        h = _vp()
        sc.call("spora_checkpoint_open", str(tmp_path / "f.safetensors").encode(), ctypes.byref(h))
        n = _size()
        sc.call("spora_checkpoint_count", h, ctypes.byref(n))
        assert n.value == 3
        m = _cstr()
        sc.call("spora_checkpoint_metadata", h, ctypes.byref(m))
        assert json.loads(m.value) == {"format": "pt"}
        name, dt, dims, nd = _cstr(), ctypes.c_int(), (_i64 * 8)(), _i32()
        sc.call("spora_checkpoint_entry", h, 0, ctypes.byref(name), ctypes.byref(dt), dims, 8, ctypes.byref(nd))
        assert (name.value, dt.value, nd.value, dims[0], dims[1]) == (b"a", sc.DTYPE_F32, 2, 2, 3)
        sc.lib.spora_checkpoint_close(h)


def test_corruption_is_an_error_naming_tensor_and_file(tmp_path):
    arrays = {"w": np.ones((64,), dtype=np.float32)}
    path = tmp_path / "c.safetensors"
    save(path, arrays)
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(sc.SporaError) as e:
        read_through_c_api(path, "w")
    assert e.value.status == sc.ERROR_INVALID_ARGUMENT
    assert "tensor 'w' is corrupted" in e.value.message and str(path) in e.value.message
    path.write_bytes(bytes(raw[:100]))
    with pytest.raises(sc.SporaError) as e:
        read_through_c_api(path, "w")
    assert str(path) in e.value.message
