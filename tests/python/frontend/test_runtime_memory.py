"""spora.runtime memory statistics (memory_allocated, max_memory_allocated,
memory_reserved, max_memory_reserved, reset_peak_memory_stats) on cpu and
sim: tensors raise them by at least their bytes, peaks outlive frees until a
reset."""
import gc

import numpy as np
import pytest

import spora


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    spora.set_device(request.param)
    return request.param


def _sync(device):
    spora.runtime.synchronize(device)


def test_tensors_raise_allocated_and_the_peak_outlives_them(device):
    rt = spora.runtime
    _sync(device)
    base = rt.memory_allocated()
    assert rt.max_memory_allocated() >= base
    assert rt.memory_reserved() >= base
    x = spora.Tensor(np.ones((256, 1024), np.float32))  # 1 MiB
    y = x + x
    _sync(device)
    held = rt.memory_allocated()
    assert held >= base + 2 * (1 << 20)
    assert rt.memory_reserved() >= held
    del x, y
    gc.collect()
    _sync(device)
    assert rt.memory_allocated() <= held - 2 * (1 << 20)
    assert rt.max_memory_allocated() >= held, "the peak stays until a reset"
    assert rt.max_memory_reserved() >= rt.memory_reserved()
    rt.reset_peak_memory_stats()
    assert rt.max_memory_allocated() == rt.memory_allocated()
    assert rt.max_memory_reserved() == rt.memory_reserved()
    assert rt.max_memory_allocated() < held


def test_device_arguments_name_the_same_device(device):
    rt = spora.runtime
    by_default = rt.memory_stats()
    assert set(by_default) == {"allocated_bytes", "peak_allocated_bytes", "reserved_bytes", "peak_reserved_bytes"}
    backend = device.partition(":")[0]
    for spelled in (device, backend, 0, backend.upper()):
        assert rt.memory_allocated(spelled) == by_default["allocated_bytes"], spelled
    # A tensor on the other device does not count here.
    other = "sim:0" if backend == "cpu" else "cpu"
    before = rt.memory_allocated()
    t = spora.Tensor(np.ones(1 << 16, np.float32), device=other)  # noqa: F841 (kept alive)
    assert rt.memory_allocated() == before
    assert rt.memory_allocated(other) >= 4 << 16


def test_bad_device_arguments():
    with pytest.raises(TypeError, match="memory_allocated"):
        spora.runtime.memory_allocated(1.5)
    with pytest.raises(ValueError, match="memory_allocated"):
        spora.runtime.memory_allocated(-1)
    with pytest.raises(spora.BackendUnavailableError):
        spora.runtime.memory_allocated("nosuchbackend")


def test_synchronize_waits_for_queued_work(device):
    x = spora.Tensor(np.arange(4096, dtype=np.float32))
    y = x
    for _ in range(20):
        y = y + 1.0
    assert spora.runtime.synchronize() is None
    assert spora.runtime.synchronize(device) is None
    np.testing.assert_array_equal(y.asnumpy(), np.arange(4096, dtype=np.float32) + 20)
    with pytest.raises(TypeError, match="synchronize"):
        spora.runtime.synchronize(1.5)
    with pytest.raises(spora.BackendUnavailableError):
        spora.runtime.synchronize("nosuchbackend")
