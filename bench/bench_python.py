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


def per_op_us(stmt, number):
    # Best of 5 repeats: the least disturbed by other processes.
    t = min(timeit.repeat(stmt, number=number, repeat=5))
    return t / number * 1e6


def main():
    rng = np.random.default_rng(0)
    cases = []
    small = rng.standard_normal((4,)).astype(np.float32)
    m64 = rng.standard_normal((64, 64)).astype(np.float32)
    for name, arrs, op, n in [
        ("a+b (4 elems)", (small, small), lambda a, b: a + b, 20000),
        ("a*2.0 (4 elems)", (small,), lambda a: a * 2.0, 20000),
        ("relu (4 elems)", (small,), None, 20000),
        ("matmul 64x64", (m64, m64), lambda a, b: a @ b, 5000),
    ]:
        sp = [spora.Tensor(a) for a in arrs]
        npa = list(arrs)
        if op is None:
            f_sp = lambda: sp[0].relu()  # noqa: E731
            f_np = lambda: np.maximum(npa[0], 0)  # noqa: E731
        else:
            f_sp = lambda op=op: op(*sp)  # noqa: E731
            f_np = lambda op=op: op(*npa)  # noqa: E731
        row = {"case": name, "spora": per_op_us(f_sp, n), "numpy": per_op_us(f_np, n)}
        if torch is not None:
            th = [torch.from_numpy(a.copy()) for a in arrs]
            f_th = (lambda: torch.relu(th[0])) if op is None else (lambda op=op: op(*th))
            row["torch"] = per_op_us(f_th, n)
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
