"""conv_pool_fusion on and off, interleaved (issue 19 line 1, docs/cpu-layouts.md).

    python bench/bench_conv_pool.py [--models lenet,mainlenet] [--modes train,infer]
                                    [--rounds 3] [--steps 40] [--settings 0,1]

For each model and mode, runs the graph step in child processes with
SPORA_CONV_POOL_FUSION=0 (conv2d_act and max_pool2d) and =1
(conv2d_act_pool, and in training conv2d_act_pool_grad for the backward
ops) alternately, `rounds` times each -- or the values --settings lists,
e.g. forward,1 to measure the backward fusion alone, unblocked,1 the
blocked hand-overs (blocked_handoff), unchained,1 those between layers --
and prints the CPU time
per step (process time, SPORA_NUM_THREADS=1: a loaded machine inflates it
far less than wall time) and the ratio of the medians. Models are
bench_python_train.py's LeNet-5 (SGD with momentum) and the main job's
LeNet (Adam), batch 64, f32; `train` is the whole step, `infer` the
forward pass in eval mode. ONEDNN_MAX_CPU_ISA=AVX2 in the environment
measures the AVX2 path; the ISA is printed.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import bench_python_train as bpt


def child(model, mode, steps):
    import numpy as np
    import spora
    from spora import nn
    spora.set_context(mode=spora.GRAPH_MODE)
    if model == "lenet":
        net = nn.SequentialCell(
            nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(400, 120, activation="relu"), nn.Dense(120, 84, activation="relu"), nn.Dense(84, 10))
        opt = nn.SGD(net.trainable_params(), 0.01, momentum=0.9)
    else:
        net = nn.SequentialCell(
            nn.Conv2d(1, 32, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, pad_mode="same", has_bias=True), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Dense(64 * 7 * 7, 128, activation="relu"), nn.Dense(128, 10))
        opt = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    if mode == "infer":
        net.set_train(False)
        step = spora.jit(lambda x, y: net(x))
    else:
        grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

        def train_step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss
        step = spora.jit(train_step)
    rng = np.random.default_rng(0)
    x = spora.Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = spora.Tensor(rng.integers(0, 10, 64).astype(np.int64))
    for _ in range(3):
        step(x, y).asnumpy()
    t0 = time.process_time()
    for _ in range(steps):
        step(x, y).asnumpy()
    print((time.process_time() - t0) / steps * 1e3)


def run(model, mode, steps, fusion):
    env = dict(os.environ, SPORA_CONV_POOL_FUSION=fusion, SPORA_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", model, mode, str(steps)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--models", default="lenet,mainlenet")
    p.add_argument("--modes", default="train,infer")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--settings", default="0,1", help="SPORA_CONV_POOL_FUSION values, the first the baseline")
    args = p.parse_args()
    settings = args.settings.split(",")
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print(f"ISA: {bpt.cpu_isa()}; load average {os.getloadavg()[0]:.1f}; cpu ms/step, 1 thread, batch 64; "
          f"SPORA_CONV_POOL_FUSION {args.settings}")
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            times = {s: [] for s in settings}
            for _ in range(args.rounds):
                for fusion in settings:
                    times[fusion].append(run(model, mode, args.steps, fusion))
            base = statistics.median(times[settings[0]])
            cols = []
            for k, v in times.items():
                med = statistics.median(v)
                cols.append(f"={k} {min(v):.2f}-{max(v):.2f} (median {med:.2f}, {base / med:.2f}x)")
            print(f"{model:10s} {mode:6s} " + "  ".join(cols))


if __name__ == "__main__":
    main()
