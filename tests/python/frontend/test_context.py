"""Backends by name, set_device / set_context / get_context."""
import numpy as np
import pytest

import spora


def test_devices_lists_usable_backends():
    ds = spora.devices()
    assert "cpu" in ds and "sim:0" in ds
    assert all(d.available for d in ds)
    everything = spora.devices(all=True)
    assert set(ds) <= set(everything)


def test_broken_plugin_is_listed_with_its_reason(tmp_path):
    import subprocess
    import sys
    import textwrap
    bad = tmp_path / "libspora-device-broken.so"
    bad.write_bytes(b"\x7fELF not really a shared object")
    code = textwrap.dedent("""
        import spora
        info = [d for d in spora.devices(all=True) if d == "broken"]
        assert info and not info[0].available and info[0].reason, info
        try:
            spora.set_device("broken")
        except spora.BackendUnavailableError as e:
            msg = str(e)
            assert "broken" in msg and "SPORA_PLUGIN_PATH" in msg, msg
            print("OK", msg)
        else:
            raise SystemExit("no error")
    """)
    env = dict(__import__("os").environ, SPORA_PLUGIN_PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


def test_set_context_and_get_context():
    spora.set_context(mode=spora.GRAPH_MODE, device_target="CPU")
    assert spora.get_context("mode") == spora.GRAPH_MODE
    assert spora.get_context("device_target") == "cpu"
    spora.set_context(device_target="sim", device_id=0)
    assert spora.get_device() == "sim:0"
    assert spora.Tensor([1.0]).device == "sim:0"
    spora.set_context(mode=spora.PYNATIVE_MODE, device_target="cpu")
    assert spora.get_context("mode") == spora.PYNATIVE_MODE
    with pytest.raises(ValueError):
        spora.set_context(mode=5)
    with pytest.raises(TypeError, match="unknown option"):
        spora.set_context(foo=1)
    with pytest.raises(ValueError, match="unknown key"):
        spora.get_context("nope")


def test_matmul_precision_is_a_context_option():
    # torch.set_float32_matmul_precision's values; the cpu computes f32 as
    # before (the setting only permits TF32 / bf16 on GPUs).
    assert spora.get_context("matmul_precision") == "highest"
    a = spora.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = spora.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    want = np.arange(6, dtype=np.float32).reshape(2, 3) @ np.arange(12, dtype=np.float32).reshape(3, 4)
    try:
        for p in ("high", "medium"):
            spora.set_context(matmul_precision=p)
            assert spora.get_context("matmul_precision") == p
            np.testing.assert_array_equal(spora.ops.matmul(a, b).asnumpy(), want)
        with pytest.raises(ValueError, match="matmul_precision"):
            spora.set_context(matmul_precision="fast")
        assert spora.get_context("matmul_precision") == "medium"
    finally:
        spora.set_context(matmul_precision="highest")
    assert spora.get_context("matmul_precision") == "highest"


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_conv_precision_is_a_context_option(device):
    # torch.backends.cudnn.allow_tf32's switch; cpu and sim compute f32
    # convolutions as before (the setting only permits TF32 on GPUs): the
    # same bits, forward and both gradients, for inputs TF32 would round.
    spora.set_device(device)
    rng = np.random.default_rng(3)
    x = spora.Tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32) / 3)
    w = spora.Tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) / 7)
    b = spora.Tensor(rng.standard_normal(4).astype(np.float32))

    def run():
        y = spora.ops.conv2d(x, w, b, padding=1, pad_mode="pad")
        gx, gw = spora.grad(lambda x, w: (spora.ops.conv2d(x, w, b, padding=1, pad_mode="pad") ** 2).sum(),
                            grad_position=(0, 1))(x, w)
        t = spora.ops.conv_transpose2d(y, w)
        return [v.asnumpy() for v in (y, gx, gw, t)]

    assert spora.get_context("conv_precision") == "highest"
    want = run()
    try:
        spora.set_context(conv_precision="high")
        assert spora.get_context("conv_precision") == "high"
        assert spora.get_context("matmul_precision") == "highest"
        for got, ref in zip(run(), want):
            np.testing.assert_array_equal(got, ref)
        for bad in ("medium", "fast", "HIGH"):
            with pytest.raises(ValueError, match="conv_precision must be \"highest\" or \"high\""):
                spora.set_context(conv_precision=bad)
        assert spora.get_context("conv_precision") == "high"
    finally:
        spora.set_context(conv_precision="highest")
    assert spora.get_context("conv_precision") == "highest"


@pytest.mark.parametrize("kwargs, want", [
    (dict(device_target="sim"), "sim:0"),
    (dict(device_target="sim:0"), "sim:0"),
    (dict(device_target="SIM"), "sim:0"),
    (dict(device_target="Sim:0"), "sim:0"),
    (dict(device_target="sim", device_id=0), "sim:0"),
    (dict(device_target="sim:0", device_id=0), "sim:0"),
    (dict(device_target="CPU"), "cpu"),
    (dict(device_target="cpu", device_id=0), "cpu"),
    (dict(device_target="cpu:0"), "cpu"),
])
def test_set_context_device_spellings(kwargs, want):
    spora.set_context(**kwargs)
    assert spora.get_device() == want
    base, _, idx = want.partition(":")
    assert spora.get_context("device_target") == base
    assert spora.get_context("device_id") == int(idx or 0)
    t = spora.Tensor([1.0, 2.0])
    assert t.device == want
    np.testing.assert_array_equal((t * 2).asnumpy(), [2.0, 4.0])


def test_set_context_device_id_alone_keeps_the_backend():
    spora.set_context(device_target="sim")
    spora.set_context(device_id=0)
    assert spora.get_device() == "sim:0"
    spora.set_device("cpu")
    spora.set_context(device_id=0)
    assert spora.get_device() == "cpu"
    # an index the backend does not have: the core's message, nothing changed
    n_sim = sum(1 for d in spora.devices() if d.startswith("sim:"))
    spora.set_context(device_target="sim")
    with pytest.raises(spora.SporaError, match=f"sim has {n_sim} device"):
        spora.set_context(device_id=n_sim)
    assert spora.get_device() == "sim:0"


@pytest.mark.parametrize("name", ["sim:0", "sim", "SIM", "Sim:0"])
def test_set_device_by_backend_or_device(name):
    spora.set_device(name)
    assert spora.get_device() == "sim:0"
    assert spora.get_context("device_target") == "sim" and spora.get_context("device_id") == 0


def test_device_target_and_device_id_conflict_says_what_to_write():
    spora.set_device("cpu")
    with pytest.raises(ValueError) as e:
        spora.set_context(device_target="sim:0", device_id=1)
    msg = str(e.value)
    assert "sim:1" in msg and "device_id=1" in msg and "'sim:0'" in msg, msg
    assert spora.get_device() == "cpu"  # nothing changed
    with pytest.raises(ValueError, match="device_id must be an integer"):
        spora.set_context(device_target="sim", device_id=-1)
    with pytest.raises(ValueError, match="not a device name"):
        spora.set_context(device_target="sim:x")
    with pytest.raises(ValueError, match="not a device name"):
        spora.set_device("sim:")
    # a bad option leaves the mode alone too
    with pytest.raises(ValueError):
        spora.set_context(mode=spora.GRAPH_MODE, device_target="sim:0", device_id=1)
    assert spora.get_context("mode") == spora.PYNATIVE_MODE


def _gpu_backends():
    return [b for b in ("cuda", "rocm") if any(d == b or d.startswith(b + ":") for d in spora.devices())]


def test_gpu_means_cuda_or_rocm():
    have = _gpu_backends()
    if have:  # a GPU machine: the first of cuda, rocm
        spora.set_context(device_target="GPU")
        assert spora.get_context("device_target") == have[0]
        assert spora.get_device().startswith(have[0])
        spora.set_device("gpu")
        assert spora.get_device().startswith(have[0])
        return
    # no GPU backend here: the error names each plugin's reason and the devices there are
    for call in (lambda: spora.set_context(device_target="GPU"), lambda: spora.set_device("gpu:0")):
        with pytest.raises(spora.BackendUnavailableError) as e:
            call()
        msg = str(e.value)
        assert "CUDA or ROCm" in msg and "cuda:" in msg and "rocm:" in msg, msg
        for d in spora.devices():
            assert str(d) in msg, msg
    assert spora.get_device() == "cpu"


def test_gpu_reasons_come_from_the_plugins(tmp_path):
    """A cuda plugin that fails to load: its loader reason is in the message."""
    import os
    import subprocess
    import sys
    import textwrap
    (tmp_path / "libspora-device-cuda.so").write_bytes(b"\x7fELF not really a shared object")
    code = textwrap.dedent("""
        import spora
        if any(d.startswith(("cuda", "rocm")) for d in spora.devices()):
            print("OK has a gpu backend")
            raise SystemExit(0)
        try:
            spora.set_context(device_target="GPU")
        except spora.BackendUnavailableError as e:
            msg = str(e)
            cuda = [d for d in spora.devices(all=True) if d == "cuda"]
            assert cuda and not cuda[0].available, spora.devices(all=True)
            assert cuda[0].reason and cuda[0].reason in msg, (cuda[0].reason, msg)
            print("OK", msg)
        else:
            raise SystemExit("no error")
    """)
    env = dict(os.environ, SPORA_PLUGIN_PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


def test_ascend_is_refused_with_what_to_write():
    for spelling in ("Ascend", "ascend:0"):
        with pytest.raises(spora.BackendUnavailableError) as e:
            spora.set_context(device_target=spelling)
        msg = str(e.value)
        assert "no Ascend backend" in msg and 'device_target="cpu"' in msg, msg
        for d in spora.devices():
            assert str(d) in msg, msg
    assert spora.get_device() == "cpu"


def test_parameter_basics():
    p = spora.Parameter(np.ones((2, 2), np.float32), name="w")
    assert isinstance(p, spora.Tensor) and p.name == "w" and p.requires_grad
    assert (p + 1).asnumpy().sum() == 8.0
    p.assign_value(spora.Tensor(np.full((2, 2), 3.0, np.float32)))
    np.testing.assert_array_equal(p.asnumpy(), np.full((2, 2), 3.0))
    p.assign_value(2)  # broadcast and cast
    np.testing.assert_array_equal(p.asnumpy(), np.full((2, 2), 2.0))
    p.set_data(spora.Tensor(np.zeros(3, np.float64)))  # set_data may change shape and dtype
    assert p.shape == (3,) and p.dtype == spora.float64
    q = spora.Parameter(spora.Tensor([1.0]), requires_grad=False)
    assert not q.requires_grad and q.name is None
    assert "Parameter" in repr(p)
