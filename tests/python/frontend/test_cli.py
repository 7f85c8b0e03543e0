"""The `spora` tool's run, bench and ir commands (frontends/cli), on a model
exported from Python and on an ONNX file, and its .npy reader on bad files.
The tool is found next to libspora.so (build/bin/spora)."""
import ctypes
import os
import subprocess

import numpy as np
import pytest

import spora
from spora import nn
from onnx_writer import FLOAT, graph, model, node, tensor, value_info


def _tool():
    lib = os.environ.get("SPORA_LIB", "")
    cand = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(lib))), "bin", "spora") if lib else ""
    if not cand or not os.path.exists(cand):
        here = os.path.dirname(os.path.realpath(spora.__file__))
        cand = os.path.join(here, "..", "..", "bin", "spora")
    if not os.path.exists(cand):
        pytest.fail(f"the spora tool is not built (looked for {cand})")
    return os.path.abspath(cand)


def cli(*args, ok=True):
    r = subprocess.run([_tool(), *map(str, args)], capture_output=True, text=True, timeout=300)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(6, 5)
        self.fc2 = nn.Dense(5, 3)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


@pytest.fixture
def exported(tmp_path):
    nn.init.set_seed(3)
    net = Net()
    net.set_train(False)
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    path = spora.export(net, spora.Tensor(x), file_name=str(tmp_path / "m.spora"))
    return net, path


def test_run_matches_python_at_any_batch(tmp_path, exported):
    net, path = exported
    out = tmp_path / "out"
    out.mkdir()
    for batch in (4, 9):
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        r = cli("run", path, "--input", f"arg0={tmp_path / 'x.npy'}", "--output-dir", out, "--repeat", 3)
        assert f"output 0: f32 [{batch}, 3]" in r.stdout and "2 more: median" in r.stdout
        np.testing.assert_allclose(np.load(out / "output_0.npy"), net(spora.Tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_run_makes_a_missing_output_dir(tmp_path, exported):
    net, path = exported
    x = np.ones((2, 6), np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("run", path, "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "new" / "out")
    np.testing.assert_allclose(np.load(tmp_path / "new" / "out" / "output_0.npy"), net(spora.Tensor(x)).numpy(),
                               rtol=1e-5, atol=1e-6)
    (tmp_path / "file").write_text("")
    r = cli("run", path, "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "file", ok=False)
    assert r.returncode == 2 and "--output-dir" in r.stderr and "is not a directory" in r.stderr, r.stderr


def test_run_onnx_file(tmp_path):
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    g = graph([node("MatMul", ["x", "w"], ["h"]), node("Sigmoid", ["h"], ["y"])],
              inputs=[value_info("x", FLOAT, ["N", 3])], outputs=[value_info("y", FLOAT, ["N", 4])],
              initializers=[tensor("w", w)])
    p = tmp_path / "m.onnx"
    p.write_bytes(model(g))
    x = np.random.default_rng(1).standard_normal((7, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("run", p, "--input", tmp_path / "x.npy", "--output-dir", tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "output_0.npy"), 1 / (1 + np.exp(-(x @ w))), rtol=1e-5, atol=1e-6)
    dump = cli("ir", "dump", p).stdout
    assert 'input "x" : f32[1,3]' in dump and "matmul" in dump and "sigmoid" in dump and "(m.onnx:1)" not in dump


def test_run_usage_errors(tmp_path, exported):
    _, path = exported
    r = cli("run", path, ok=False)
    assert r.returncode == 2 and "arg0: f32 [4, 6]" in r.stderr  # lists what the model takes
    np.save(tmp_path / "x.npy", np.zeros((4, 6), np.float32))
    r = cli("run", path, "--input", f"nope={tmp_path / 'x.npy'}", ok=False)
    assert r.returncode == 2 and "no input named 'nope'" in r.stderr
    r = cli("run", path, "--repeat", "0", ok=False)
    assert r.returncode == 2 and "--repeat" in r.stderr
    r = cli("run", tmp_path / "missing.spora", "--input", tmp_path / "x.npy", ok=False)
    assert r.returncode == 1 and "missing.spora" in r.stderr


def _npy_bytes(descr, shape, data, fortran=False, version=1):
    h = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}".encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    length = len(h).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + length + h + data


@pytest.mark.parametrize("name, content, message", [
    ("truncated.npy", _npy_bytes("<f4", "(4, 6)", b"\0" * 95), "is 95 bytes but shape (4, 6) of <f4 needs 96 (truncated)"),
    ("trailing.npy", _npy_bytes("<f4", "(4, 6)", b"\0" * 97), "trailing bytes"),
    ("fortran.npy", _npy_bytes("<f4", "(4, 6)", b"\0" * 96, fortran=True), "Fortran-order"),
    ("bigendian.npy", _npy_bytes(">f4", "(4, 6)", b"\0" * 96), "big-endian"),
    ("complex.npy", _npy_bytes("<c8", "(4, 6)", b"\0" * 192), "unsupported .npy dtype '<c8'"),
    ("notnpy.npy", b"hello world, not numpy", "not a .npy file"),
    ("header.npy", b"\x93NUMPY\x01\x00\xff\x7f{'descr'", "runs past the end"),
    ("overflow.npy", _npy_bytes("<f4", "(99999999999, 99999999999, 9999999)", b""), "overflows"),
    ("wrongdtype.npy", _npy_bytes("<f8", "(4, 6)", b"\0" * 192), "must be f32 [4, 6] (or another shape of that rank)"),
    ("wrongrank.npy", _npy_bytes("<f4", "(24,)", b"\0" * 96), "the file holds f32 [24]"),
])
def test_bad_npy_inputs_name_the_file(tmp_path, exported, name, content, message):
    _, path = exported
    (tmp_path / name).write_bytes(content)
    r = cli("run", path, "--input", tmp_path / name, ok=False)
    assert r.returncode == 1
    assert name in r.stderr and message in r.stderr, r.stderr


def test_npy_versions_and_dtypes_round_trip(tmp_path):
    # An identity ONNX model per dtype: the tool reads the .npy, runs, writes it back.
    from onnx_writer import BOOL, DOUBLE, INT64, UINT8
    for dt, code in ((np.float64, DOUBLE), (np.int64, INT64), (np.uint8, UINT8), (np.bool_, BOOL)):
        g = graph([node("Identity", ["x"], ["y"])], inputs=[value_info("x", code, [2, 3])],
                  outputs=[value_info("y", code, [2, 3])])
        p = tmp_path / "id.onnx"
        p.write_bytes(model(g))
        x = (np.arange(6).reshape(2, 3) % 2).astype(dt)
        (tmp_path / "x.npy").write_bytes(_npy_bytes(np.lib.format.dtype_to_descr(x.dtype), "(2, 3)", x.tobytes(),
                                                     version=2))
        cli("run", p, "--input", tmp_path / "x.npy", "--output-dir", tmp_path)
        y = np.load(tmp_path / "output_0.npy")
        assert y.dtype == x.dtype and np.array_equal(y, x)


def test_ir_dump_view_and_bench(tmp_path, exported):
    _, path = exported
    raw = cli("ir", "dump", path).stdout
    assert 'input "arg0" : f32[4,6]' in raw and "linear(" in raw
    opt = cli("ir", "dump", path, "--after-passes", "O1").stdout
    assert "linear_act(" in opt and "relu(" not in opt  # the epilogue fusion ran
    dot = cli("ir", "view", path, "-o", tmp_path / "g.dot")
    text = (tmp_path / "g.dot").read_text()
    assert text.startswith("digraph") and "fc1.weight" in text and text.count("->") >= 6
    r = cli("ir", "dump", path, "--after-passes", "O7", ok=False)
    assert r.returncode == 2
    b = cli("bench", path, "--batch", 16, "--warmup", 1, "--iters", 5).stdout
    assert "input arg0: f32 [16, 6]" in b and "median" in b and "p90" in b and "samples/s" in b
    assert dot.returncode == 0


def test_c_api_import_onnx(tmp_path):
    """spora_model_import_onnx through ctypes: the C entry point itself."""
    lib_path = os.environ.get("SPORA_LIB")
    if not lib_path:
        pytest.skip("SPORA_LIB not set")
    lib = ctypes.CDLL(lib_path)
    lib.spora_last_error.restype = ctypes.c_char_p
    vp = ctypes.c_void_p
    ctx, dev, m = vp(), vp(), vp()
    assert lib.spora_context_create(ctypes.byref(ctx)) == 0
    assert lib.spora_device_find(ctx, b"cpu", ctypes.byref(dev)) == 0
    g = graph([node("Relu", ["x"], ["y"])], inputs=[value_info("x", FLOAT, ["N", 5])],
              outputs=[value_info("y", FLOAT, ["N", 5])])
    p = tmp_path / "relu.model"  # any name: the explicit import does not look at the extension
    p.write_bytes(model(g))
    assert lib.spora_model_import_onnx(str(p).encode(), dev, ctypes.byref(m)) == 0, lib.spora_last_error()
    n = ctypes.c_size_t()
    assert lib.spora_model_num_inputs(m, ctypes.byref(n)) == 0 and n.value == 1
    assert lib.spora_model_free(m) == 0
    p.write_bytes(model(g)[:-3])
    assert lib.spora_model_import_onnx(str(p).encode(), dev, ctypes.byref(m)) == 1  # INVALID_ARGUMENT
    assert b"relu.model" in lib.spora_last_error()
    assert lib.spora_model_import_onnx(str(tmp_path / "none.onnx").encode(), dev, ctypes.byref(m)) == 2  # NOT_FOUND
    lib.spora_context_free(ctx)
