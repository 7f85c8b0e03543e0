"""Eager latency of a 1-element f32 add from Python, per dispatch path.

    PYTHONPATH=build/python python bench/eager_latency.py [device ...]   (default: cpu)

For each device: spora.ops.add(a, b) (what bench/gpu/bench_gpu.py times),
a + b (the Tensor type slot), and spora.ops.raw.add (the schema-checked
generic call), in µs per op, best of several runs; each run ends with
spora.runtime.synchronize, so an asynchronous device's queued work is paid
for. bench_eager_latency [device] times the same add through the C API, so
the difference is the Python layer.
"""
import sys
import time

import numpy as np


def _best_us(fn, sync, n, reps=7):
    for _ in range(min(n, 500)):
        fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main(devices):
    import spora
    from spora import ops
    for name in devices:
        spora.set_context(mode=spora.PYNATIVE_MODE, device_target=name)
        dev = spora.get_device()
        a = spora.Tensor(np.ones(1, np.float32))
        b = spora.Tensor(np.ones(1, np.float32))
        sync = lambda: spora.runtime.synchronize(dev)  # noqa: E731
        # A simulated device runs each op on its own thread: fewer of them.
        n = 20000 if name == "cpu" else 4000
        print(f"eager add, 1-element f32, {name} (best of 7 x {n} ops)")
        for label, fn in (("spora.ops.add(a, b)", lambda: ops.add(a, b)), ("a + b", lambda: a + b),
                          ("spora.ops.raw.add(a, b)", lambda: ops.raw.add(a, b))):
            print(f"  {label:26s} {_best_us(fn, sync, n):8.3f} us/op")


if __name__ == "__main__":
    main(sys.argv[1:] or ["cpu"])
