#!/usr/bin/env python3
"""Spora vs PyTorch on the same GPU, one invocation: op speed, eager latency, training, peak memory.

    python bench/gpu/bench_gpu.py [--device cuda] [--only ops,latency,train] [--scale 1.0]

Each framework runs in its own child process (Spora first, then PyTorch), the
same figures in the same order; the table prints each figure, PyTorch's, and
the ratio against the issue's goal:
  ops      matmul 4096^2 f32 / bf16 / f16 and 1024^2 f32 (TFLOP/s), add 2^26
           f32, softmax 8192^2 f32, layer norm [8192, 1024] f32 (GB/s of
           compulsory traffic), conv2d 3x3 N32 C64->64 56^2 f32 (TFLOP/s):
           each framework's default, then both in exact FP32 and both with
           TF32 allowed
  latency  eager add of 1-element tensors from Python (us per op)
  train    one training step, samples/s (Spora: the whole step one jit
           graph; PyTorch: eager): MLP 784-512-512-10 b128 SGD momentum, MLP
           4x4096 b2048, LeNet-5 b64, the main job's LeNet b64 Adam, a
           transformer encoder layer (d 512, 8 heads, seq 256, b 32, AdamW,
           bf16 autocast on both); with each model's peak GPU memory
           (allocator statistics: spora.runtime / torch.cuda)
Matmul precision is each framework's default (exact f32 on both). f32
convolutions differ by default: PyTorch lets cuDNN use TF32
(torch.backends.cudnn.allow_tf32), Spora does not (conv_precision
"highest"); the rows "exact FP32" (allow_tf32 False / "highest") and "TF32
allowed" (allow_tf32 True / conv_precision "high") compare like with like.
--scale shrinks every size (e.g. 0.1 to try it on the sim device). Without
a usable Spora GPU device it prints "no device: <reason>" and exits 0.
PyTorch is optional and never a dependency of Spora.
"""
import argparse
import json
import os
import subprocess
import sys
import time

GB = 1e9


def _sizes(scale):
    s = lambda n: max(8, int(n * scale))  # noqa: E731
    return {"mm_big": s(4096), "mm_small": s(1024), "add": s(1 << 26), "sm": s(8192), "ln_rows": s(8192),
            "conv_n": max(1, int(32 * scale)), "conv_hw": s(56)}


def _timeit(fn, sync, min_time=0.3, max_iters=200):
    """Seconds per call: warm up, then enough calls for min_time (median of 3 batches)."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    iters = max(3, min(max_iters, int(min_time / 3 / one)))
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / iters)
    runs.sort()
    return runs[1]


# -- the figures, per framework: each returns {name: value} -----------------------------------------

def _op_figures(fw, sz):
    """fw: an adapter with tensor(shape, dtype), matmul, add, softmax, layer_norm, conv2d, conv_tf32, sync."""
    out = {}
    for name, n, dt in (("matmul 4096^2 f32", sz["mm_big"], "f32"), ("matmul 4096^2 bf16", sz["mm_big"], "bf16"),
                        ("matmul 4096^2 f16", sz["mm_big"], "f16"), ("matmul 1024^2 f32", sz["mm_small"], "f32")):
        a, b = fw.tensor((n, n), dt), fw.tensor((n, n), dt)
        out[name] = 2 * n ** 3 / _timeit(lambda: fw.matmul(a, b), fw.sync) / 1e12
    n = sz["add"]
    a, b = fw.tensor((n,), "f32"), fw.tensor((n,), "f32")
    out["add 2^26 f32"] = 3 * 4 * n / _timeit(lambda: fw.add(a, b), fw.sync) / GB
    n = sz["sm"]
    x = fw.tensor((n, n), "f32")
    out["softmax 8192^2 f32"] = 2 * 4 * n * n / _timeit(lambda: fw.softmax(x), fw.sync) / GB
    r = sz["ln_rows"]
    x, g, bb = fw.tensor((r, 1024), "f32"), fw.tensor((1024,), "f32"), fw.tensor((1024,), "f32")
    out["layer_norm 8192x1024 f32"] = 2 * 4 * r * 1024 / _timeit(lambda: fw.layer_norm(x, g, bb), fw.sync) / GB
    nb, hw = sz["conv_n"], sz["conv_hw"]
    x, w = fw.tensor((nb, 64, hw, hw), "f32"), fw.tensor((64, 64, 3, 3), "f32")
    flops = 2 * nb * 64 * 64 * 9 * hw * hw
    out["conv2d 3x3 N32 C64 56^2 f32"] = flops / _timeit(lambda: fw.conv2d(x, w), fw.sync) / 1e12
    default = fw.conv_tf32(None)
    try:
        for name, tf32 in (("conv2d 3x3 N32 C64 56^2 f32, exact FP32", False),
                           ("conv2d 3x3 N32 C64 56^2 f32, TF32 allowed", True)):
            fw.conv_tf32(tf32)
            out[name] = flops / _timeit(lambda: fw.conv2d(x, w), fw.sync) / 1e12
    finally:
        fw.conv_tf32(default)
    return out


def _latency_figures(fw):
    a, b = fw.tensor((1,), "f32"), fw.tensor((1,), "f32")
    fw.sync()
    for _ in range(200):
        fw.add(a, b)
    fw.sync()
    best = None
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            fw.add(a, b)
        fw.sync()
        dt = (time.perf_counter() - t0) / 2000 * 1e6
        best = dt if best is None else min(best, dt)
    return {"eager add, 1 element, Python (us)": best}


TRAIN = ("mlp b128", "lenet5 b64", "mainjob b64", "transformer b32 bf16", "mlp 4x4096 b2048")


def _train_figures(fw, scale, steps):
    out = {}
    for model in TRAIN:
        try:
            rate, peak = fw.train(model, scale, steps)
        except Exception as e:  # a model that fails is reported, the rest still run
            print(f"[{fw.name}] {model}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr)
            continue
        out[f"train {model} (samples/s)"] = rate
        if peak is not None:
            out[f"train {model} peak (MiB)"] = peak / 2 ** 20
    return out


def _batch(model, scale, rng):
    import numpy as np
    if model.startswith("mlp 4x4096"):
        b, shape, classes = max(8, int(2048 * scale)), (max(8, int(4096 * scale)),), 10
    elif model.startswith("mlp"):
        b, shape, classes = 128, (784,), 10
    elif model.startswith("transformer"):
        b, shape, classes = max(2, int(32 * scale)), (max(8, int(256 * scale)), 512), None
    else:
        b, shape, classes = 64, (1, 28, 28), 10
    x = rng.standard_normal((b,) + shape).astype(np.float32)
    y = (rng.integers(0, classes, b).astype(np.int64) if classes else
         rng.standard_normal((b,) + shape).astype(np.float32))
    return b, x, y


def _time_steps(step, batches, steps, b):
    for i in range(5):
        step(*batches[i % len(batches)])
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(steps):
            step(*batches[i % len(batches)])
        rates.append(b * steps / (time.perf_counter() - t0))
    rates.sort()
    return rates[1]


class SporaFw:
    name = "spora"

    def __init__(self, device):
        import spora
        self.spora = spora
        spora.set_context(mode=spora.PYNATIVE_MODE, device_target=device)
        self.device = spora.get_device()
        self.dt = {"f32": spora.float32, "bf16": spora.bfloat16, "f16": spora.float16}

    def tensor(self, shape, dt):
        import numpy as np
        return self.spora.Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32), dtype=self.dt[dt])

    def sync(self):
        self.spora.runtime.synchronize(self.device)

    def matmul(self, a, b):
        return self.spora.ops.matmul(a, b)

    def add(self, a, b):
        return self.spora.ops.add(a, b)

    def softmax(self, x):
        return self.spora.ops.softmax(x, -1)

    def layer_norm(self, x, g, b):
        return self.spora.ops.layer_norm(x, (x.shape[-1],), g, b)

    def conv2d(self, x, w):
        return self.spora.ops.conv2d(x, w, padding=1)

    def conv_tf32(self, allow):
        """Whether f32 convolutions may use TF32: True / False, a setting this
        returned, or None to leave it; returns the setting before."""
        was = self.spora.get_context("conv_precision")
        if allow is not None:
            self.spora.set_context(conv_precision=allow if isinstance(allow, str) else ("high" if allow else "highest"))
        return was

    def _memory(self):
        rt = getattr(self.spora, "runtime", None)
        if rt is None or not hasattr(rt, "max_memory_allocated"):
            return None, None
        return rt.reset_peak_memory_stats, rt.max_memory_allocated

    def train(self, model, scale, steps):
        import numpy as np
        spora = self.spora
        from spora import nn
        spora.set_context(mode=spora.GRAPH_MODE)
        width = max(8, int(4096 * scale))
        if model.startswith("mlp 4x4096"):
            net = nn.SequentialCell(nn.Dense(width, width, activation="relu"), nn.Dense(width, width, activation="relu"),
                                    nn.Dense(width, width, activation="relu"), nn.Dense(width, 10))
        elif model.startswith("mlp"):
            net = nn.SequentialCell(nn.Dense(784, 512, activation="relu"), nn.Dense(512, 512, activation="relu"),
                                    nn.Dense(512, 10))
        elif model.startswith("lenet5"):
            net = nn.SequentialCell(
                nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                nn.Dense(400, 120, activation="relu"), nn.Dense(120, 84, activation="relu"), nn.Dense(84, 10))
        elif model.startswith("mainjob"):
            net = nn.SequentialCell(
                nn.Conv2d(1, 32, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                nn.Dense(64 * 7 * 7, 128, activation="relu"), nn.Dense(128, 10))
        else:
            net = nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, dropout=0.0, batch_first=True)
            spora.amp.auto_mixed_precision(net, "O1", spora.bfloat16)
        if model.startswith("transformer"):
            loss_fn = nn.MSELoss()
            opt = nn.AdamW(net.trainable_params(), 1e-4)
        elif model.startswith("mainjob"):
            loss_fn, opt = nn.CrossEntropyLoss(), nn.Adam(net.trainable_params(), 1e-3)
        else:
            loss_fn, opt = nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
        grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

        @spora.jit
        def train_step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss
        rng = np.random.default_rng(0)
        batches = []
        for _ in range(4):
            b, x, y = _batch(model, scale, rng)
            batches.append((spora.Tensor(x), spora.Tensor(y)))
        reset, peak = self._memory()
        if reset:
            reset()
        rate = _time_steps(lambda x, y: train_step(x, y).asnumpy(), batches, steps, b)
        return rate, (peak() if peak else None)


class TorchFw:
    name = "torch"

    def __init__(self, device):
        import torch
        self.torch = torch
        self.dev = torch.device("cuda")
        self.dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

    def tensor(self, shape, dt):
        return self.torch.randn(shape, device=self.dev, dtype=self.dt[dt])

    def sync(self):
        self.torch.cuda.synchronize()

    def matmul(self, a, b):
        return a @ b

    def add(self, a, b):
        return a + b

    def softmax(self, x):
        return self.torch.softmax(x, -1)

    def layer_norm(self, x, g, b):
        return self.torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b)

    def conv2d(self, x, w):
        return self.torch.nn.functional.conv2d(x, w, padding=1)

    def conv_tf32(self, allow):
        cudnn = self.torch.backends.cudnn
        conv = getattr(cudnn, "conv", None)
        if hasattr(conv, "fp32_precision"):
            # PyTorch >= 2.9: its new flag only (reading allow_tf32 after a
            # mix of the two APIs raises).
            was = conv.fp32_precision
            if allow is not None:
                conv.fp32_precision = allow if isinstance(allow, str) else ("tf32" if allow else "ieee")
            return was
        was = cudnn.allow_tf32
        if allow is not None:
            cudnn.allow_tf32 = allow
        return was

    def train(self, model, scale, steps):
        import numpy as np
        torch = self.torch
        tnn = torch.nn
        width = max(8, int(4096 * scale))
        if model.startswith("mlp 4x4096"):
            net = tnn.Sequential(tnn.Linear(width, width), tnn.ReLU(), tnn.Linear(width, width), tnn.ReLU(),
                                 tnn.Linear(width, width), tnn.ReLU(), tnn.Linear(width, 10))
        elif model.startswith("mlp"):
            net = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(),
                                 tnn.Linear(512, 10))
        elif model.startswith("lenet5"):
            net = tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(6, 16, 5),
                                 tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(400, 120), tnn.ReLU(),
                                 tnn.Linear(120, 84), tnn.ReLU(), tnn.Linear(84, 10))
        elif model.startswith("mainjob"):
            net = tnn.Sequential(tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                                 tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                                 tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))
        else:
            net = tnn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, dropout=0.0, batch_first=True)
        net = net.to(self.dev)
        amp = model.startswith("transformer")
        if amp:
            loss_fn, opt = tnn.MSELoss(), torch.optim.AdamW(net.parameters(), lr=1e-4)
        elif model.startswith("mainjob"):
            loss_fn, opt = tnn.CrossEntropyLoss(), torch.optim.Adam(net.parameters(), lr=1e-3)
        else:
            loss_fn, opt = tnn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            loss.item()
        rng = np.random.default_rng(0)
        batches = []
        for _ in range(4):
            b, x, y = _batch(model, scale, rng)
            batches.append((torch.from_numpy(x).to(self.dev), torch.from_numpy(y).to(self.dev)))
        torch.cuda.reset_peak_memory_stats()
        rate = _time_steps(step, batches, steps, b)
        return rate, torch.cuda.max_memory_allocated()


# -- driver ----------------------------------------------------------------------------------------

# Issue 14's goals as ratios spora / torch (higher is better; "(us)" and "(MiB)" figures: <= 1.0)
GOALS = {"matmul 4096^2 f32": (0.95,), "matmul 4096^2 bf16": (0.9,), "matmul 4096^2 f16": (0.9,),
         "matmul 1024^2 f32": (0.95,), "add 2^26 f32": (0.9,), "softmax 8192^2 f32": (0.9,),
         "layer_norm 8192x1024 f32": (0.9,), "train mlp b128 (samples/s)": (2.0,),
         "train lenet5 b64 (samples/s)": (1.5,), "train mainjob b64 (samples/s)": (1.0,),
         "train transformer b32 bf16 (samples/s)": (1.0,)}


class _Emit(dict):
    """Prints each figure as its own JSON line the moment it is measured,
    so a child that times out still reports what it measured."""

    def __setitem__(self, name, value):
        super().__setitem__(name, value)
        print(json.dumps({name: value}), flush=True)

    def update(self, other):
        for k, v in other.items():
            self[k] = v


def worker(framework, args):
    fw = SporaFw(args.device) if framework == "spora" else TorchFw(args.device)
    only = args.only.split(",")
    out = _Emit()
    if "ops" in only:
        out.update(_op_figures(fw, _sizes(args.scale)))
    if "latency" in only:
        out.update(_latency_figures(fw))
    if "train" in only:
        out.update(_train_figures(fw, args.scale, args.steps))


def spora_gpu_reason(device):
    import spora
    names = [str(d) for d in spora.devices()]
    base = device.split(":")[0]
    if any(n == device or n.split(":")[0] == base for n in names):
        return None
    for d in spora.devices(all=True):
        if str(d) == base and not d.available:
            return d.reason
    return f"{device} is not among Spora's devices ({', '.join(names)})"


def _figures(text):
    out = {}
    for line in (text or "").splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.update(d)
    return out


def run_child(python, framework, args):
    cmd = [python, os.path.abspath(__file__), "--worker", framework, "--device", args.device, "--only", args.only,
           "--scale", str(args.scale), "--steps", str(args.steps)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return _figures(out), f"timed out after {args.timeout} s (figures so far kept); stderr: {err[-300:]}"
    err = proc.stderr.strip()
    if proc.returncode != 0:
        return _figures(proc.stdout), (err.splitlines() or [f"exit {proc.returncode}"])[-1][:300]
    return _figures(proc.stdout), err


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=("spora", "torch"), help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda")
    p.add_argument("--only", default="ops,latency,train")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--timeout", type=int, default=300, help="seconds per framework")
    p.add_argument("--torch-python", default=sys.executable)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args)
        return 0
    why = spora_gpu_reason(args.device)
    if why:
        print(f"no device: {why}")
        return 0
    spora_res, spora_err = run_child(sys.executable, "spora", args)
    has_torch = subprocess.run([args.torch_python, "-c", "import torch; assert torch.cuda.is_available()"],
                               capture_output=True).returncode == 0
    torch_res, torch_err = run_child(args.torch_python, "torch", args) if has_torch else ({}, "PyTorch with CUDA not found")
    print(f"{'figure':42s}{'spora':>12s}{'torch':>12s}{'ratio':>8s}  goal")
    for name in list(spora_res) + [n for n in torch_res if n not in spora_res]:
        s, t = spora_res.get(name), torch_res.get(name)
        lower_better = "(us)" in name or "(MiB)" in name
        ratio = s / t if s and t else None
        goal = GOALS.get(name)
        goal_txt = "<= 1.0" if lower_better else (f">= {goal[0]}" if goal else "")
        fmt = lambda v: f"{v:12,.1f}" if v is not None else f"{'-':>12s}"  # noqa: E731
        shown = f"{ratio:8.2f}" if ratio else f"{'n/a':>8s}"
        print(f"{name:42s}{fmt(s)}{fmt(t)}{shown}  {goal_txt}")
    for who, err in (("spora", spora_err), ("torch", torch_err)):
        if err:
            print(f"[{who}] {err[-600:]}")
    print("ratio = spora / torch; units: TFLOP/s (matmul, conv), GB/s (add, softmax, layer_norm), samples/s, us, MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
