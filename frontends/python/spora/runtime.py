"""Device runtime: waiting for a device, and memory statistics.

The names follow MindSpore 2.4's ``mindspore.runtime`` and PyTorch's
``torch.cuda``::

    import spora
    spora.set_device("cuda")
    ...  # train
    print(spora.runtime.max_memory_allocated() / 2**20, "MiB at the peak")
    spora.runtime.reset_peak_memory_stats()

``device`` is a device name ("cuda:0", "sim"), an index on the default
device's backend (1 means "cuda:1" when the default device is a CUDA one), or
None for the default device (spora.get_device()).

Bytes are counted by the device's plugin since it started: *allocated* bytes
are the sizes of live device allocations (tensors, compiled graphs' arenas,
kernel workspaces); *reserved* bytes are the device memory the plugin holds
for them, including blocks it caches for reuse after a free (the CUDA
plugin's caching allocator keeps freed memory), so reserved >= allocated.
The calls are cheap and do not wait for the device: a tensor freed while
queued work still uses it already counts as freed. A plugin without
statistics (built against plugin ABI 1.0) raises spora.SporaError naming the
device.
"""
from . import _C
from ._context import _resolve, get_device

__all__ = ["synchronize", "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats"]


def _device(device, who):
    if device is None:
        return get_device()
    if isinstance(device, bool):
        raise TypeError(f"{who}: device must be a device name, an index or None, got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"{who}: device index must be >= 0, got {device}")
        return _resolve(get_device().partition(":")[0], device_id=device, who=who)
    if isinstance(device, str):
        return _resolve(device, who=who)
    raise TypeError(f"{who}: device must be a device name (\"cuda:0\"), an index or None, "
                    f"got {type(device).__name__}")


def synchronize(device=None):
    """Waits until every operation queued on the device has finished, as
    mindspore.runtime.synchronize() / torch.cuda.synchronize(); raises the
    device's error if queued work failed. Reading a tensor (asnumpy()) waits
    for what it needs by itself: this is for timing and for handing device
    memory to other libraries."""
    _C.synchronize(_device(device, "synchronize"))


def memory_stats(device=None):
    """All four figures as a dict: allocated_bytes, peak_allocated_bytes,
    reserved_bytes, peak_reserved_bytes."""
    return _C.memory_stats(_device(device, "memory_stats"))


def memory_allocated(device=None):
    """Bytes of the device's live allocations (tensors, arenas, workspaces)."""
    return _C.memory_stats(_device(device, "memory_allocated"))["allocated_bytes"]


def max_memory_allocated(device=None):
    """The highest memory_allocated() since the start or the last
    reset_peak_memory_stats()."""
    return _C.memory_stats(_device(device, "max_memory_allocated"))["peak_allocated_bytes"]


def memory_reserved(device=None):
    """Bytes of device memory the plugin holds: live allocations and the
    freed blocks it caches for reuse."""
    return _C.memory_stats(_device(device, "memory_reserved"))["reserved_bytes"]


def max_memory_reserved(device=None):
    """The highest memory_reserved() since the start or the last
    reset_peak_memory_stats()."""
    return _C.memory_stats(_device(device, "max_memory_reserved"))["peak_reserved_bytes"]


def reset_peak_memory_stats(device=None):
    """Starts both peaks again from the current allocated and reserved bytes."""
    _C.reset_peak_memory_stats(_device(device, "reset_peak_memory_stats"))
