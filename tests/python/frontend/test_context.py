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
