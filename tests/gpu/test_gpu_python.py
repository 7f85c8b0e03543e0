"""The GPU backends asked for by name from Python on a machine without a GPU:
spora.set_device fails loudly with the plugin's recorded no-device reason,
and the other devices keep working. Run by ctest (gpu_python) for the GPU
plugins that were built (SPORA_GPU_PLUGINS, comma-separated)."""
import ctypes
import os

import numpy as np
import pytest

import spora

BUILT = [p for p in os.environ.get("SPORA_GPU_PLUGINS", "").split(",") if p]
RUNTIME_REASON = {
    "cuda": "cudaGetDeviceCount returned 35",
    "rocm": "hipGetDeviceCount returned hipErrorNoDevice",
}


def driver_present(name):
    if name == "cuda":
        try:
            ctypes.CDLL("libcuda.so.1")
            return "libcuda.so.1 is installed"
        except OSError:
            return ""
    return "/dev/kfd exists" if os.path.exists("/dev/kfd") else ""


@pytest.mark.parametrize("name", BUILT)
def test_set_device_by_name_fails_with_the_reason(name):
    why = driver_present(name)
    if why:
        pytest.skip(why + ": not a no-device machine")
    for spec in (name, name + ":0"):
        with pytest.raises(spora.BackendUnavailableError) as info:
            spora.set_device(spec)
        msg = str(info.value)
        assert "unavailable" in msg
        assert "no device: " in msg
        assert RUNTIME_REASON[name] in msg
    # cpu is unaffected.
    spora.set_device("cpu")
    x = spora.tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal((x + x).numpy(), np.arange(4, dtype=np.float32) * 2)


def test_some_gpu_plugin_was_built():
    assert BUILT, "gpu_python runs only when a GPU plugin is built"
