#!/usr/bin/env python3
"""The profiler's overhead on the MLP training step (issue 20: < 5 %).

    PYTHONPATH=build/python python bench/bench_profiler.py [--rounds 12] [--steps 40] [--modes graph,pynative]

The model is bench_python_train.py's MLP (784-512-512-10, batch 128, SGD
with momentum, cross-entropy, 2 threads). Rounds alternate in one process:
`steps` steps with no profiler, then `steps` steps inside a running
spora.Profiler session (recording every op, kernel, step range and memory
sample; the trace is written once at the end, outside the timing). The
ratio is the median of the per-pair ratios on / off, so load that drifts
during the run cancels. On a busy machine that ratio is noisy; the second
figure does not depend on the step's time: the profiler's cost per op
(a 4-element eager `add`, on vs off, interleaved) times the ops one step
records (counted in its trace), over the step's time. Prints the CPU's
instruction set beside the figures.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python_train import cpu_isa  # noqa: E402

THREADS = 2


def _batches(batch, n=8, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, 784)).astype(np.float32), rng.integers(0, 10, batch).astype(np.int64))
            for _ in range(n)]


def make_step(mode):
    import spora
    from spora import nn
    spora.set_context(mode=spora.GRAPH_MODE if mode == "graph" else spora.PYNATIVE_MODE)
    net = nn.SequentialCell(nn.Dense(784, 512, activation="relu"), nn.Dense(512, 512, activation="relu"),
                            nn.Dense(512, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    step = spora.jit(train_step) if mode == "graph" else train_step
    batches = [(spora.Tensor(x), spora.Tensor(y)) for x, y in _batches(128)]
    return step, batches


def timed(step, batches, steps, profiled, out_dir):
    import spora
    prof = spora.Profiler(out_dir, print_summary=False) if profiled else None
    t0 = time.perf_counter()
    for i in range(steps):
        mark = spora.profiler._range_begin("step", f"step {i}") if profiled else 0
        step(*batches[i % len(batches)]).asnumpy()
        spora.profiler._range_end(mark)
    dt = time.perf_counter() - t0
    if prof is not None:
        prof.stop()
    return dt, prof


def per_op_cost_us(rounds=7, n=20000):
    """The profiler's cost per eager op (host span, kernel span, flow, memory sample, source line):
    median over interleaved rounds of (time per tiny add, profiled) - (the same, not profiled)."""
    import numpy as np
    import spora
    x = spora.Tensor(np.ones((4,), np.float32))

    def run():
        t0 = time.perf_counter()
        for _ in range(n):
            x + x
        return (time.perf_counter() - t0) / n * 1e6
    run()
    diffs = []
    for _ in range(rounds):
        off = run()
        with tempfile.TemporaryDirectory() as tmp:
            prof = spora.Profiler(tmp, print_summary=False)
            on = run()
            prof.stop()
        diffs.append(on - off)
    return statistics.median(diffs)


def ops_per_step(trace):
    import json
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    steps = sum(1 for e in events if e["ph"] == "X" and e.get("cat") == "step")
    ops = sum(1 for e in events if e["ph"] == "X" and e.get("cat") in ("op", "node"))
    return ops / max(steps, 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--modes", default="graph,pynative")
    args = p.parse_args()
    os.environ.setdefault("SPORA_NUM_THREADS", str(THREADS))
    print(f"CPU: {cpu_isa()}, {os.cpu_count()} cores; {THREADS} threads; load average at start "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    cost = per_op_cost_us()
    print(f"profiler cost per eager op: {cost:.2f} us (median of interleaved rounds)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            step, batches = make_step(mode)
            timed(step, batches, 10, False, tmp)  # warm up: compile, caches
            ratios, off_s, on_s, last = [], [], [], None
            for r in range(args.rounds):
                # Alternate which goes first, so neither always follows the other.
                order = (False, True) if r % 2 == 0 else (True, False)
                got = {}
                for profiled in order:
                    got[profiled], prof = timed(step, batches, args.steps, profiled, tmp)
                    last = prof or last
                ratios.append(got[True] / got[False])
                off_s.append(got[False])
                on_s.append(got[True])
            t0 = time.perf_counter()
            trace = last.analyse()
            write_s = time.perf_counter() - t0
            ms = lambda xs: 1000 * statistics.median(xs) / args.steps  # noqa: E731
            print(f"mlp {mode:8s}: off {ms(off_s):7.2f} ms/step, profiled {ms(on_s):7.2f} ms/step, "
                  f"ratio on/off median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f},"
                  f" {args.rounds} pairs); trace of {args.steps} steps {os.path.getsize(trace) / 1e6:.1f} MB written "
                  f"in {write_s * 1000:.0f} ms", flush=True)
            per_step = ops_per_step(trace)
            print(f"mlp {mode:8s}: {per_step:.0f} ops recorded per step x {cost:.2f} us per op = "
                  f"{per_step * cost / 1000:.3f} ms, {100 * per_step * cost / 1000 / ms(off_s):.1f} % of the step",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
