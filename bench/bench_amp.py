#!/usr/bin/env python3
"""Mixed-precision training throughput: f32 vs O2 bf16, Spora and PyTorch.

    PYTHONPATH=build/python python bench/bench_amp.py [--threads 1] [--steps 20] [--rounds 7]

Models (SGD momentum 0.9, cross-entropy, synthetic data, one compiled graph
per step in Spora's GRAPH_MODE):
  mlp    784-512-512-10, batch 128
  lenet  LeNet-5 (conv 6 -> pool -> conv 16 -> pool -> 120 -> 84 -> 10), batch 64
Configurations:
  spora f32       Model's step without amp
  spora O2        spora.amp level O2 with the default dtype: what amp picks
                  here (bf16 only where a bf16 matmul measured faster than
                  f32, amp.cpu_bf16_choice(); else f32, and a warning)
  spora O2 bf16   level O2 with dtype=spora.bfloat16 forced (the core
                  mixed_precision pass)
  torch f32       PyTorch eager
  torch bf16      torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss
PyTorch is skipped when it does not import. Rounds interleave the
configurations (each round runs every configuration for --steps steps), so
load from other processes hits them alike; the figure per configuration is
the best round (repeated-min), in wall time and in this process's CPU time
per step (CPU time counts only while our threads ran, so it is the steadier
figure on a loaded machine; with more than one thread it adds the threads).
"""
import argparse
import os
import time


def _data(batch, shape, n=4, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch,) + shape).astype(np.float32), rng.integers(0, 10, batch).astype(np.int32))
            for _ in range(n)]


SHAPES = {"mlp": (128, (784,)), "lenet": (64, (1, 28, 28))}


def spora_step(model, level, dtype=None):
    import spora
    from spora import amp, nn
    spora.set_context(mode=spora.GRAPH_MODE)
    nn.init.set_seed(0)
    if model == "mlp":
        net = nn.SequentialCell(nn.Dense(784, 512, activation="relu"), nn.Dense(512, 512, activation="relu"),
                                nn.Dense(512, 10))
    else:
        net = nn.SequentialCell(
            nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(400, 120, activation="relu"), nn.Dense(120, 84, activation="relu"), nn.Dense(84, 10))
    opt = nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
    step = amp.build_train_network(net, opt, nn.CrossEntropyLoss(), level=level, dtype=dtype)
    batch, shape = SHAPES[model]
    data = [(spora.Tensor(x), spora.Tensor(y)) for x, y in _data(batch, shape)]

    def run(i):
        return step(*data[i % len(data)])

    def sync(out):
        out.asnumpy()
    return run, sync


def torch_step(model, bf16):
    import torch
    from torch import nn
    torch.manual_seed(0)
    if model == "mlp":
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    else:
        net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
                            nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(),
                            nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    opt = torch.optim.SGD(net.parameters(), 0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    batch, shape = SHAPES[model]
    data = [(torch.from_numpy(x), torch.from_numpy(y).long()) for x, y in _data(batch, shape)]

    def run(i):
        x, y = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync(out):
        out.item()
    return run, sync


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--models", default="mlp,lenet")
    args = ap.parse_args()
    os.environ["SPORA_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
        print("PyTorch not importable: its half is skipped")
    import spora
    # The instruction set the cpu plugin runs on (oneDNN's, lowered by
    # ONEDNN_MAX_CPU_ISA): without "bf16" amp's default keeps f32.
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    print(f"cpu arch {spora._C.device_properties('cpu').get('arch', '?')}"
          + (f", ONEDNN_MAX_CPU_ISA={cap}" if cap else ""))
    use, reason = spora.amp.cpu_bf16_choice()
    print(f"amp's default on this cpu: {'bf16' if use else 'f32'} ({reason})")
    print(f"threads {args.threads}, {args.steps} steps per round, best of {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f}")
    for model in args.models.split(","):
        batch = SHAPES[model][0]
        import warnings
        with warnings.catch_warnings():  # the choice is printed above
            warnings.simplefilter("ignore")
            configs = {"spora f32": spora_step(model, "O0"), "spora O2": spora_step(model, "O2"),
                       "spora O2 bf16": spora_step(model, "O2", spora.bfloat16)}
        if torch is not None:
            configs["torch f32"] = torch_step(model, False)
            configs["torch bf16 autocast"] = torch_step(model, True)
        best = {k: [float("inf"), float("inf")] for k in configs}
        for run, sync in configs.values():  # warm-up: compile, plan, first-touch
            for i in range(3):
                sync(run(i))
        for _ in range(args.rounds):
            for name, (run, sync) in configs.items():
                w0, c0 = time.perf_counter(), time.process_time()
                for i in range(args.steps):
                    out = run(i)
                sync(out)
                w, c = time.perf_counter() - w0, time.process_time() - c0
                best[name][0] = min(best[name][0], w / args.steps)
                best[name][1] = min(best[name][1], c / args.steps)
        print(f"\n{model} (batch {batch})        wall ms/step  samples/s   cpu ms/step")
        for name, (w, c) in best.items():
            print(f"  {name:22s} {w * 1e3:9.2f} {batch / w:11.0f} {c * 1e3:11.2f}")
        s32, s16, sam = best["spora f32"], best["spora O2 bf16"], best["spora O2"]
        print(f"  spora O2 (amp's choice)/f32 speed-up: wall {s32[0] / sam[0]:.2f}x, cpu {s32[1] / sam[1]:.2f}x")
        print(f"  spora O2 bf16/f32 speed-up: wall {s32[0] / s16[0]:.2f}x, cpu {s32[1] / s16[1]:.2f}x")
        if torch is not None:
            t32, t16 = best["torch f32"], best["torch bf16 autocast"]
            print(f"  torch autocast/f32 speed-up: wall {t32[0] / t16[0]:.2f}x, cpu {t32[1] / t16[1]:.2f}x")
            print(f"  spora O2 vs torch autocast (throughput ratio): wall {t16[0] / s16[0]:.2f}x, "
                  f"cpu {t16[1] / s16[1]:.2f}x")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
