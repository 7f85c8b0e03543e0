#!/usr/bin/env python3
"""GPU training throughput: Spora (graph mode) vs PyTorch on the same GPU, one invocation.

    python bench/gpu/train_speed.py [--device cuda] [--models lenet5,mainjob,mlp] [--steps 100]

Models (synthetic data, cross-entropy):
  lenet5   LeNet-5 (conv 6 5x5 pad 2 -> relu -> pool -> conv 16 5x5 -> relu -> pool -> 120 -> 84 -> 10),
           batch 64, SGD momentum 0.9
  mainjob  the main job's LeNet (examples/fashion_mnist.py: conv 32 3x3 same -> pool -> conv 64 -> pool ->
           dense 128 -> 10), batch 64, Adam
  mlp      784-512-512-10, batch 128, SGD momentum 0.9
Each configuration runs in its own process: Spora's whole step (forward, loss,
grad, update) as one jit graph on --device; PyTorch eager on "cuda". A step is
timed up to reading its loss on the host, as a training loop does. Prints
samples/s per configuration and Spora's ratio to PyTorch.

Without a usable Spora GPU device this prints "no device: <reason>" and
exits 0. PyTorch is optional (--torch-python names another interpreter);
it is never a dependency of Spora or its tests.
"""
import argparse
import json
import os
import subprocess
import sys
import time

MODELS = {"lenet5": 64, "mainjob": 64, "mlp": 128}


def _batches(batch, shape, n=8, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch,) + shape).astype(np.float32), rng.integers(0, 10, batch).astype(np.int64))
            for _ in range(n)]


def _time(step, batches, steps, batch):
    """Median samples/s over 5 runs of `steps` steps after a warm-up of 10."""
    for i in range(10):
        step(*batches[i % len(batches)])
    rates = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(steps):
            step(*batches[i % len(batches)])
        rates.append(batch * steps / (time.perf_counter() - t0))
    rates.sort()
    return rates[len(rates) // 2]


def worker_spora(model, device, steps):
    import spora
    from spora import nn
    spora.set_context(mode=spora.GRAPH_MODE, device_target=device)
    batch = MODELS[model]
    if model == "mlp":
        net = nn.SequentialCell(nn.Dense(784, 512, activation="relu"), nn.Dense(512, 512, activation="relu"),
                                nn.Dense(512, 10))
        shape = (784,)
    elif model == "lenet5":
        net = nn.SequentialCell(
            nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(400, 120, activation="relu"), nn.Dense(120, 84, activation="relu"), nn.Dense(84, 10))
        shape = (1, 28, 28)
    else:
        net = nn.SequentialCell(
            nn.Conv2d(1, 32, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(64 * 7 * 7, 128, activation="relu"), nn.Dense(128, 10))
        shape = (1, 28, 28)
    loss_fn = nn.CrossEntropyLoss()
    if model == "mainjob":
        opt = nn.Adam(net.trainable_params(), 1e-3)
    else:
        opt = nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    @spora.jit
    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    batches = [(spora.Tensor(x), spora.Tensor(y)) for x, y in _batches(batch, shape)]

    def run(x, y):
        train_step(x, y).asnumpy()
    return _time(run, batches, steps, batch)


def worker_torch(model, steps):
    import torch
    import torch.nn as tnn
    dev = torch.device("cuda")
    batch = MODELS[model]
    if model == "mlp":
        net = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(), tnn.Linear(512, 10))
        shape = (784,)
    elif model == "lenet5":
        net = tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(6, 16, 5),
                             tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(400, 120), tnn.ReLU(),
                             tnn.Linear(120, 84), tnn.ReLU(), tnn.Linear(84, 10))
        shape = (1, 28, 28)
    else:
        net = tnn.Sequential(tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                             tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                             tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))
        shape = (1, 28, 28)
    net = net.to(dev)
    if model == "mainjob":
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = tnn.CrossEntropyLoss()

    def run(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        loss.item()
    batches = [(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)) for x, y in _batches(batch, shape)]
    return _time(run, batches, steps, batch)


def spora_gpu_reason(device):
    """None when `device` is usable from Spora, else why not."""
    import spora
    names = [str(d) for d in spora.devices()]
    base = device.split(":")[0]
    if any(n == device or n.split(":")[0] == base for n in names):
        return None
    for d in spora.devices(all=True):
        if str(d) == base and not d.available:
            return d.reason
    return f"{device} is not among Spora's devices ({', '.join(names)})"


def run_child(python, args, timeout):
    cmd = [python, os.path.abspath(__file__)] + args
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    if proc.returncode != 0:
        return None, ((proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])[:160]
    return json.loads(proc.stdout.strip().splitlines()[-1])["samples_per_s"], ""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "MODEL"), help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda")
    p.add_argument("--models", default="lenet5,mainjob,mlp")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--timeout", type=int, default=240, help="seconds per configuration")
    p.add_argument("--torch-python", default=sys.executable)
    args = p.parse_args()
    if args.worker:
        framework, model = args.worker
        rate = worker_spora(model, args.device, args.steps) if framework == "spora" else worker_torch(model, args.steps)
        print(json.dumps({"samples_per_s": rate}))
        return 0

    why = spora_gpu_reason(args.device)
    if why:
        print(f"no device: {why}")
        return 0
    has_torch = subprocess.run([args.torch_python, "-c", "import torch; assert torch.cuda.is_available()"],
                               capture_output=True).returncode == 0
    if not has_torch:
        print("PyTorch with CUDA not found (pass --torch-python): Spora figures only")
    print(f"{'model':9s}{'batch':>6s}{'spora graph':>16s}{'torch eager':>16s}{'ratio':>8s}   (samples/s)")
    for model in args.models.split(","):
        common = ["--device", args.device, "--steps", str(args.steps)]
        s_rate, s_err = run_child(sys.executable, ["--worker", "spora", model] + common, args.timeout)
        t_rate, t_err = (run_child(args.torch_python, ["--worker", "torch", model] + common, args.timeout)
                         if has_torch else (None, "not run"))
        ratio = f"{s_rate / t_rate:8.2f}" if s_rate and t_rate else f"{'n/a':>8s}"
        s = f"{s_rate:16,.0f}" if s_rate else f"{'failed':>16s}"
        t = f"{t_rate:16,.0f}" if t_rate else f"{'failed':>16s}"
        print(f"{model:9s}{MODELS[model]:6d}{s}{t}{ratio}", flush=True)
        for who, err in (("spora", s_err), ("torch", t_err)):
            if err and err != "not run":
                print(f"  {who} {model}: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
