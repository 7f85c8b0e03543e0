#!/usr/bin/env python3
"""Training throughput and peak memory: Spora's Python frontend vs PyTorch.

    python bench/bench_python_train.py [--torch-python /work/venv-torch/bin/python] [--steps 60]

Models (synthetic data):
  mlp          784-512-512-10, batch 128, SGD with momentum 0.9, cross-entropy
  lenet        LeNet-5 (conv 6 -> pool -> conv 16 -> pool -> 120 -> 84 -> 10), batch 64,
               SGD with momentum 0.9, cross-entropy
  mainlenet    the main job's LeNet (examples/fashion_mnist.py: conv 32 3x3 same -> pool ->
               conv 64 -> pool -> 128 -> 10), batch 64, Adam, cross-entropy
  transformer  one encoder layer (d_model 256, 4 heads, feed-forward 1024, dropout 0.1,
               post-norm, batch first), sequence 128, batch 16, Adam, MSE to a random target
Configurations, each in its own process (so peak RSS is that run's alone),
all with 2 threads set explicitly:
  spora graph     the whole step (forward, loss, grad, update) as one jit graph
  spora pynative  the same step op by op (for reference)
  torch eager     PyTorch eager
  torch compile   torch.compile of the model (where it works here)
Prints samples/s, peak RSS and the ratios of Spora's graph mode to PyTorch's
best mode (goals, issue 5: >= 1.5x throughput, <= 0.8x RSS).

`--busy N` runs N other processes that only spin (`while True: pass`,
pinned nowhere) beside every configuration: the throughput on a machine
another job also uses (issue 19: one busy process may cost at most half).
The CPU's instruction set (the best of AVX-512 with bf16 / AVX-512 / AVX2,
and ONEDNN_MAX_CPU_ISA when set) and the load average are printed with
the figures.

PyTorch runs in whatever interpreter --torch-python names (default: this one
if it imports torch, else /work/venv-torch/bin/python); it is never a
dependency of Spora or its tests.
"""
import argparse
import json
import os
import subprocess
import sys
import time

THREADS = 2
MODELS = {"mlp": 128, "lenet": 64, "mainlenet": 64, "transformer": 16}  # batch sizes
SHAPES = {"mlp": (784,), "lenet": (1, 28, 28), "mainlenet": (1, 28, 28), "transformer": (128, 256)}
ADAM = {"mainlenet", "transformer"}  # the others train with SGD + momentum


# -- workers (run in a child process) -------------------------------------------------

def _batches(model, n=8, seed=0):
    """n (input, target) pairs: class labels, or for the transformer a float target of the output's shape."""
    import numpy as np
    rng = np.random.default_rng(seed)
    batch, shape = MODELS[model], SHAPES[model]

    def target():
        if model == "transformer":
            return rng.standard_normal((batch,) + shape).astype(np.float32)
        return rng.integers(0, 10, batch).astype(np.int64)
    return [(rng.standard_normal((batch,) + shape).astype(np.float32), target()) for _ in range(n)]


def _time(step, batches, steps, batch):
    """Median samples/s over 5 runs of `steps` steps after a warm-up."""
    for i in range(5):
        step(*batches[i % len(batches)])
    rates = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(steps):
            step(*batches[i % len(batches)])
        rates.append(batch * steps / (time.perf_counter() - t0))
    rates.sort()
    return rates[len(rates) // 2]


def worker_spora(model, mode, steps):
    os.environ.setdefault("SPORA_NUM_THREADS", str(THREADS))
    import spora
    from spora import nn
    spora.set_context(mode=spora.GRAPH_MODE if mode == "graph" else spora.PYNATIVE_MODE)
    batch = MODELS[model]
    if model == "mlp":
        net = nn.SequentialCell(nn.Dense(784, 512, activation="relu"), nn.Dense(512, 512, activation="relu"),
                                nn.Dense(512, 10))
    elif model == "lenet":
        net = nn.SequentialCell(
            nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(400, 120, activation="relu"), nn.Dense(120, 84, activation="relu"), nn.Dense(84, 10))
    elif model == "mainlenet":
        net = nn.SequentialCell(
            nn.Conv2d(1, 32, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(64 * 7 * 7, 128, activation="relu"), nn.Dense(128, 10))
    else:
        net = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.1, batch_first=True)
    loss_fn = nn.MSELoss() if model == "transformer" else nn.CrossEntropyLoss()
    if model in ADAM:
        opt = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    else:
        opt = nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    step = spora.jit(train_step) if mode == "graph" else train_step
    batches = [(spora.Tensor(x), spora.Tensor(y)) for x, y in _batches(model)]

    def run(x, y):
        step(x, y).asnumpy()  # wait for the step, as a training loop reading the loss does
    return _time(run, batches, steps, batch)


def worker_torch(model, mode, steps):
    import torch
    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(1)
    import torch.nn as tnn
    batch = MODELS[model]
    if model == "mlp":
        net = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(), tnn.Linear(512, 10))
    elif model == "lenet":
        net = tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(6, 16, 5),
                             tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(400, 120), tnn.ReLU(),
                             tnn.Linear(120, 84), tnn.ReLU(), tnn.Linear(84, 10))
    elif model == "mainlenet":
        net = tnn.Sequential(tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                             tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                             tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))
    else:
        net = tnn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.1, batch_first=True)
    if model in ADAM:
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = tnn.MSELoss() if model == "transformer" else tnn.CrossEntropyLoss()
    fwd = torch.compile(net) if mode == "compile" else net

    def run(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(fwd(x), y)
        loss.backward()
        opt.step()
        loss.item()
    batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in _batches(model)]
    return _time(run, batches, steps, batch)


# -- driver -----------------------------------------------------------------------------

def cpu_isa():
    """The CPU's vector instruction set as oneDNN can use it, e.g. "AVX-512 + bf16"."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "unknown"
    isa = ("AVX-512 + bf16" if {"avx512f", "avx512_bf16"} <= flags else "AVX-512" if "avx512f" in flags
           else "AVX2" if "avx2" in flags else "no AVX2")
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return isa + (f" (oneDNN capped: ONEDNN_MAX_CPU_ISA={cap})" if cap else "")


def run_child(python, framework, model, mode, steps, busy=0):
    """Runs one configuration in a fresh process, with `busy` spinning processes beside it; returns
    (samples/s, peak RSS MiB) or an error string."""
    env = dict(os.environ, SPORA_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS))
    cmd = [python, os.path.abspath(__file__), "--worker", framework, model, mode, "--steps", str(steps)]
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        for sp in spinners:
            sp.kill()
            sp.wait()
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
        return None, last[:100]
    rate = json.loads(out.strip().splitlines()[-1])["samples_per_s"]
    return rate, usage.ru_maxrss / 1024.0  # ru_maxrss is in KiB on Linux


def find_torch_python(arg):
    if arg:
        return arg
    # Asked of a child: importing torch here would put this process's ~500 MiB
    # into every child's peak RSS (Linux keeps ru_maxrss across fork + exec).
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
        return sys.executable
    cand = "/work/venv-torch/bin/python"
    return cand if os.path.exists(cand) else None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", nargs=3, metavar=("FRAMEWORK", "MODEL", "MODE"), help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--torch-python", default=None)
    p.add_argument("--models", default="mlp,lenet,mainlenet,transformer")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--busy", type=int, default=0, help="spinning processes beside each run")
    args = p.parse_args()
    if args.worker:
        framework, model, mode = args.worker
        fn = worker_spora if framework == "spora" else worker_torch
        print(json.dumps({"samples_per_s": fn(model, mode, args.steps)}))
        return 0

    torch_python = find_torch_python(args.torch_python)
    configs = [("spora", "graph"), ("spora", "pynative")]
    if torch_python:
        configs += [("torch", "eager")] + ([] if args.no_compile else [("torch", "compile")])
    else:
        print("torch not installed (pass --torch-python): Spora figures only")
    print(f"CPU: {cpu_isa()}, {os.cpu_count()} cores; {THREADS} threads; {args.busy} busy process(es) beside each run;"
          f" load average at start {os.getloadavg()[0]:.2f}", flush=True)
    results = {}
    for model in args.models.split(","):
        for framework, mode in configs:
            python = sys.executable if framework == "spora" else torch_python
            rate, rss = run_child(python, framework, model, mode, args.steps, args.busy)
            results[(model, framework, mode)] = (rate, rss)
            shown = f"{rate:10,.0f} samples/s  peak RSS {rss:7.1f} MiB" if rate else f"failed: {rss}"
            print(f"{model:6s} {framework:6s} {mode:9s} {shown}", flush=True)

    print(f"\nratios (Spora graph mode vs PyTorch's best mode; {THREADS} threads; {cpu_isa()};"
          f" load average at end {os.getloadavg()[0]:.2f})")
    print(f"{'model':8s}{'spora graph':>14s}{'torch best':>22s}{'speed ratio':>13s}{'RSS ratio':>11s}")
    for model in args.models.split(","):
        s_rate, s_rss = results[(model, "spora", "graph")]
        torch_runs = [(r, m, mode) for (mm, f, mode), (r, m) in results.items() if mm == model and f == "torch" and r]
        if not s_rate or not torch_runs:
            print(f"{model:8s}  n/a")
            continue
        t_rate, t_rss, t_mode = max(torch_runs)
        print(f"{model:8s}{s_rate:14,.0f}{t_rate:14,.0f} ({t_mode:>7s}){s_rate / t_rate:12.2f}x"
              f"{s_rss / t_rss:10.2f}x")
    print("goals (issue 19): speed ratio >= 1.5x (transformer >= 1.2x), RSS ratio <= 0.8x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
