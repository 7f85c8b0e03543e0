"""Checkpoints and exported models: round trips, bad files, the C API."""
import ctypes
import os
import subprocess

import numpy as np
import pytest

import spora
from spora import nn
from nn_testutil import np_


@pytest.fixture(autouse=True)
def _pynative():
    spora.set_context(mode=spora.PYNATIVE_MODE)
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE)


class LeNetish(nn.Cell):
    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, pad_mode="valid", has_bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.flat = nn.Flatten()
        self.fc = nn.Dense(4 * 3 * 3, classes)

    def construct(self, x):
        return self.fc(self.flat(self.pool(nn.ReLU()(self.bn(self.conv(x))))))


def trained_net(seed=0):
    nn.init.set_seed(seed)
    net = LeNetish()
    # move the BatchNorm statistics off their initial values
    net.set_train(True)
    net(spora.Tensor(np.random.default_rng(seed).standard_normal((8, 1, 8, 8)).astype(np.float32)))
    net.set_train(False)
    return net


def params_of(net):
    return {n: np_(p).copy() for n, p in net.parameters_and_names()}


def test_round_trip_cell_list_and_dict(tmp_path):
    net = trained_net()
    path = tmp_path / "net.ckpt"
    spora.save_checkpoint(net, path, metadata={"epoch": "3"})
    loaded = spora.load_checkpoint(path)
    want = params_of(net)
    assert list(loaded) == list(want)
    for n, p in loaded.items():
        assert isinstance(p, spora.Parameter) and p.name == n
        np.testing.assert_array_equal(np_(p), want[n])
    assert spora.load_checkpoint_metadata(path) == {"epoch": "3"}
    other = trained_net(seed=1)
    assert spora.load_param_into_net(other, loaded) == ([], [])
    for n, v in params_of(other).items():
        np.testing.assert_array_equal(v, want[n])
    # list of Parameters and dicts, with extra entries
    spora.save_checkpoint(net.trainable_params(), tmp_path / "list.ckpt", append_dict={"epoch": np.int32(7)})
    d = spora.load_checkpoint(tmp_path / "list.ckpt")
    assert list(d) == [p.name for p in net.trainable_params()] + ["epoch"] and int(np_(d["epoch"])) == 7
    spora.save_checkpoint({"a": np.arange(4, dtype=np.int64), "b": spora.Tensor(np.ones((2, 2), np.float16))},
                          tmp_path / "dict.ckpt")
    d = spora.load_checkpoint(tmp_path / "dict.ckpt", filter_prefix="b")
    assert list(d) == ["a"] and d["a"].dtype == spora.int64


def test_load_checkpoint_into_net_argument(tmp_path):
    net, other = trained_net(), trained_net(seed=2)
    spora.save_checkpoint(net, tmp_path / "x.ckpt")
    spora.load_checkpoint(tmp_path / "x.ckpt", net=other)
    for a, b in zip(net.get_parameters(), other.get_parameters()):
        np.testing.assert_array_equal(np_(a), np_(b))


def test_mismatched_names_or_shapes_load_nothing(tmp_path):
    net = trained_net()
    before = params_of(net)
    bad = {n: spora.Tensor(np.zeros_like(v)) for n, v in before.items()}
    bad["fc.weight"] = spora.Tensor(np.zeros((3, 36), np.float32))  # wrong shape
    bad["extra.w"] = spora.Tensor(np.zeros(1, np.float32))          # unknown name
    del bad["bn.gamma"]                                               # missing
    with pytest.raises(spora.serialization.CheckpointError) as e:
        spora.load_param_into_net(net, bad)
    msg = str(e.value)
    assert "missing from the checkpoint: bn.gamma" in msg and "not in the network: extra.w" in msg
    assert "fc.weight: checkpoint shape (3, 36), network shape (10, 36)" in msg and "nothing was loaded" in msg
    for n, v in params_of(net).items():
        np.testing.assert_array_equal(v, before[n])  # untouched, including the good entries
    # non-strict: unknown and missing names are reported, shapes still checked
    del bad["fc.weight"]
    missing, unused = spora.load_param_into_net(net, bad, strict_load=False)
    assert missing == ["bn.gamma", "fc.weight"] and unused == ["extra.w"]
    assert np.all(np_(net.conv.weight) == 0) and np.all(np_(net.bn.gamma) == before["bn.gamma"])
    wrong_dtype = {"conv.weight": spora.Tensor(np.zeros((4, 1, 3, 3), np.float64))}
    with pytest.raises(spora.serialization.CheckpointError, match="conv.weight: checkpoint dtype float64"):
        spora.load_param_into_net(net, wrong_dtype, strict_load=False)


def _corrupt(src, dst, how):
    data = bytearray(open(src, "rb").read())
    if how == "truncate":
        data = data[:len(data) - 7]
    elif how == "flip":
        data[-5] ^= 0x40  # a byte in the last tensor's data: the CRC must catch it
    elif how == "header":
        data[0:8] = (len(data) * 4).to_bytes(8, "little")
    open(dst, "wb").write(bytes(data))


@pytest.mark.parametrize("how,pattern", [("truncate", r"ckpt"), ("flip", r"(?i)crc"), ("header", r"ckpt")])
def test_damaged_checkpoints_raise_and_load_nothing(tmp_path, how, pattern):
    net = trained_net()
    good = tmp_path / "good.ckpt"
    spora.save_checkpoint(net, good)
    bad = tmp_path / f"{how}.ckpt"
    _corrupt(good, bad, how)
    other = trained_net(seed=3)
    before = params_of(other)
    with pytest.raises(spora.SporaError, match=pattern) as e:
        spora.load_checkpoint(bad, net=other)
    assert str(bad) in str(e.value) or bad.name in str(e.value)
    for n, v in params_of(other).items():
        np.testing.assert_array_equal(v, before[n])


def test_missing_files():
    with pytest.raises(FileNotFoundError, match="no_such.ckpt"):
        spora.load_checkpoint("/nonexistent/no_such.ckpt")
    with pytest.raises(FileNotFoundError, match="no_such.spora"):
        spora.load("/nonexistent/no_such.spora")


def test_save_is_atomic_over_an_existing_file(tmp_path):
    path = tmp_path / "a.ckpt"
    net = trained_net()
    spora.save_checkpoint(net, path)
    with pytest.raises(spora.SporaError):
        spora.save_checkpoint({"__metadata__": np.zeros(1, np.float32)}, path)
    assert list(spora.load_checkpoint(path)) == list(params_of(net))  # the old file is intact
    assert os.listdir(tmp_path) == ["a.ckpt"]


# -- export / load -------------------------------------------------------------------------

def test_export_load_same_outputs(tmp_path):
    net = trained_net()
    x = np.random.default_rng(5).standard_normal((3, 1, 8, 8)).astype(np.float32)
    want = np_(net(spora.Tensor(x)))
    path = spora.export(net, spora.Tensor(x), file_name=str(tmp_path / "lenet"))
    assert path.endswith("lenet.spora") and os.path.exists(path)
    g = spora.load(path)
    assert isinstance(g, nn.GraphCell)
    (name, dtype, shape), = g.input_types
    assert dtype == spora.float32 and tuple(shape) == (3, 1, 8, 8)
    np.testing.assert_allclose(np_(g(spora.Tensor(x))), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_(g(x)), want, rtol=1e-5, atol=1e-6)
    # another batch size runs (planned for its shape) and equals the net's outputs
    np.testing.assert_allclose(np_(g(x[:2])), want[:2], rtol=1e-5, atol=1e-6)
    x5 = np.random.default_rng(6).standard_normal((5, 1, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(np_(g(x5)), np_(net(spora.Tensor(x5))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_(g(x)), want, rtol=1e-5, atol=1e-6)  # back to the stored shape
    # another rank or dtype is refused before the C API
    with pytest.raises(ValueError, match=r"must be float32 \(3, 1, 8, 8\) \(or another shape of that rank\), "
                                         r"got float32 \(1, 8, 8\)"):
        g(x[0])
    with pytest.raises(ValueError, match=r"got float64"):
        g(spora.Tensor(x.astype(np.float64)))
    # training mode is restored after export
    net.set_train(True)
    spora.export(net, spora.Tensor(x), file_name=str(tmp_path / "again.spora"))
    assert net.training


def test_damaged_model_file_raises(tmp_path):
    net = trained_net()
    x = np.zeros((1, 1, 8, 8), np.float32)
    path = spora.export(net, spora.Tensor(x), file_name=str(tmp_path / "m.spora"))
    for how in ("truncate", "flip"):
        bad = tmp_path / f"{how}.spora"
        _corrupt(path, bad, how)
        with pytest.raises(spora.SporaError, match=bad.name):
            spora.load(bad)


def _lib():
    import spora as _s
    here = os.path.dirname(_s.__file__)
    for cand in (os.path.join(here, "lib", "libspora.so"), os.path.join(here, "..", "..", "lib", "libspora.so")):
        if os.path.exists(cand):
            return ctypes.CDLL(os.path.abspath(cand))
    pytest.skip("libspora.so not found next to the package")


def run_model_through_c_api(path, x):
    """spora_model_load + spora_model_run through ctypes on libspora.so: the
    C API, not the Python package's graph."""
    lib = _lib()
    vp, P = ctypes.c_void_p, ctypes.POINTER
    lib.spora_last_error.restype = ctypes.c_char_p
    ctx, dev, model, inp = vp(), vp(), vp(), vp()

    def ok(status):
        assert status == 0, lib.spora_last_error().decode()
    ok(lib.spora_context_create(ctypes.byref(ctx)))
    ok(lib.spora_device_find(ctx, b"cpu", ctypes.byref(dev)))
    ok(lib.spora_model_load(str(path).encode(), dev, ctypes.byref(model)))
    dims = (ctypes.c_int64 * x.ndim)(*x.shape)
    x = np.ascontiguousarray(x, np.float32)
    ok(lib.spora_tensor_create(dev, 1, dims, x.ndim, x.ctypes.data_as(vp), ctypes.c_size_t(x.nbytes),
                               ctypes.byref(inp)))
    nout = ctypes.c_size_t()
    ok(lib.spora_model_num_outputs(model, ctypes.byref(nout)))
    outs = (vp * nout.value)()
    ok(lib.spora_model_run(model, ctypes.byref(inp), ctypes.c_size_t(1), outs, nout))
    nd = ctypes.c_int32()
    ok(lib.spora_tensor_ndim(vp(outs[0]), ctypes.byref(nd)))
    shape = (ctypes.c_int64 * nd.value)()
    ok(lib.spora_tensor_shape(vp(outs[0]), shape, nd))
    y = np.empty(tuple(shape), np.float32)
    ok(lib.spora_tensor_read(vp(outs[0]), y.ctypes.data_as(vp), ctypes.c_size_t(y.nbytes)))
    for o in outs:
        lib.spora_tensor_free(vp(o))
    lib.spora_tensor_free(inp)
    lib.spora_model_free(model)
    lib.spora_context_free(ctx)
    return y


def test_exported_file_gives_the_same_outputs_through_the_c_api(tmp_path):
    net = trained_net()
    x = np.random.default_rng(6).standard_normal((2, 1, 8, 8)).astype(np.float32)
    want = np_(net(spora.Tensor(x)))
    path = spora.export(net, spora.Tensor(x), file_name=str(tmp_path / "c.spora"))
    np.testing.assert_allclose(run_model_through_c_api(path, x), want, rtol=1e-5, atol=1e-6)


def test_exported_file_runs_in_the_spora_run_model_program(tmp_path):
    lib = os.environ.get("SPORA_LIB", "")
    program = os.path.join(os.path.dirname(os.path.dirname(lib)), "bin", "spora_run_model") if lib else ""
    if not os.path.exists(program):
        pytest.skip("spora_run_model (examples/c) is not built")
    net = trained_net()
    x = np.random.default_rng(7).standard_normal((4, 1, 8, 8)).astype(np.float32)
    want = np_(net(spora.Tensor(x)))
    path = spora.export(net, spora.Tensor(x), file_name=str(tmp_path / "p.spora"))
    x.astype("<f4").tofile(tmp_path / "x.bin")
    subprocess.run([program, path, "cpu", str(tmp_path / "x.bin"), "--out", str(tmp_path / "y")], check=True,
                   capture_output=True)
    got = np.fromfile(tmp_path / "y0.bin", "<f4").reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
