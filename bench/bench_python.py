"""Python eager small-op latency: spora vs NumPy (and PyTorch when it is
installed, with 2 threads), printing per-op microseconds and ratios.

Run: PYTHONPATH=build/python .venv/bin/python bench/bench_python.py
Goal (issue 5): spora's per-op time <= 0.8x PyTorch's.
"""
import timeit

import numpy as np

import spora

try:
    import torch
    torch.set_num_threads(2)
except ImportError:
    torch = None


def per_op_us(fns, number, rounds=9):
    """Per-call microseconds of each function: the best of `rounds` rounds,
    the functions interleaved within each round so that a busy moment on
    this shared machine hits them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(f, number=number) / number * 1e6)
    return best


def main():
    rng = np.random.default_rng(0)
    cases = []
    small = rng.standard_normal((4,)).astype(np.float32)
    m64 = rng.standard_normal((64, 64)).astype(np.float32)
    for name, arrs, op, n in [
        ("a+b (4 elems)", (small, small), lambda a, b: a + b, 5000),
        ("a*2.0 (4 elems)", (small,), lambda a: a * 2.0, 5000),
        ("relu (4 elems)", (small,), None, 5000),
        ("matmul 64x64", (m64, m64), lambda a, b: a @ b, 500),
    ]:
        sp = [spora.Tensor(a) for a in arrs]
        npa = list(arrs)
        if op is None:
            f_sp = lambda: sp[0].relu()  # noqa: E731
            f_np = lambda: np.maximum(npa[0], 0)  # noqa: E731
        else:
            f_sp = lambda op=op: op(*sp)  # noqa: E731
            f_np = lambda op=op: op(*npa)  # noqa: E731
        fns = [f_sp, f_np]
        if torch is not None:
            th = [torch.from_numpy(a.copy()) for a in arrs]
            fns.append((lambda: torch.relu(th[0])) if op is None else (lambda op=op: op(*th)))
        times = per_op_us(fns, n)
        row = {"case": name, "spora": times[0], "numpy": times[1]}
        if torch is not None:
            row["torch"] = times[2]
        cases.append(row)
    if torch is None:
        print("torch not installed: PyTorch columns skipped")
    head = f"{'case':<18} {'spora us':>9} {'numpy us':>9} {'spora/numpy':>11}"
    if torch is not None:
        head += f" {'torch us':>9} {'spora/torch':>11}"
    print(head)
    for r in cases:
        line = f"{r['case']:<18} {r['spora']:>9.2f} {r['numpy']:>9.2f} {r['spora'] / r['numpy']:>11.2f}"
        if torch is not None:
            line += f" {r['torch']:>9.2f} {r['spora'] / r['torch']:>11.2f}"
        print(line)


if __name__ == "__main__":
    main()
