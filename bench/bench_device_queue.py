#!/usr/bin/env python3
"""The dataset's device queue (issue 20 line 2) on a device with its own memory: Model.train epochs
over a pipeline with the queue off (each batch copied when taken) and on (the next batch's copy
enqueued on the copy stream while the step runs), interleaved in one process. Pipelines: a built-in
one (NumpySlicesDataset, the C++ iterator's queue) and a GeneratorDataset over a random-access
object (Python rows; the Python iterator's queue, spora_device_queue_*).

    PYTHONPATH=build/python python bench/bench_device_queue.py --device cuda:0 [--rounds 6] [--batches 40]
        [--sources builtin,generator]

The model is an MLP (3072-1024-1024-10, batch 256: a 3 MB input batch per step, so the copy is
worth hiding), SGD with momentum, cross-entropy, in PyNative and graph mode. Each round trains one
epoch with depth 0, then one with depth 1; the figure is the median of the per-round ratios
(off / on: > 1 means the queue is faster), so load that drifts during the run cancels. On sim the
copies are host memcpys on the simulator's threads: the figure says little about a GPU.
"""
import argparse
import itertools
import statistics
import time

import numpy as np


def epoch_seconds(model, data, depth):
    from spora.dataset import config
    config.set_device_queue_size(depth)
    t0 = time.perf_counter()
    model.train(1, data)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="sim:0")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--modes", default="pynative,graph")
    ap.add_argument("--sources", default="builtin,generator")
    args = ap.parse_args()

    import spora
    from spora import nn
    from spora.dataset import GeneratorDataset, NumpySlicesDataset
    from spora.train import Model

    spora.set_device(args.device)
    rng = np.random.default_rng(0)
    n = 256 * args.batches
    x = rng.standard_normal((n, 3072)).astype(np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)

    class Samples:
        def __len__(self):
            return n

        def __getitem__(self, i):
            return x[i], y[i]

    sources = {"builtin": NumpySlicesDataset((x, y), shuffle=False).batch(256),
               "generator": GeneratorDataset(Samples(), ["data", "label"], shuffle=False).batch(256)}
    for mode, source in itertools.product(args.modes.split(","), args.sources.split(",")):
        data = sources[source]
        spora.set_context(mode=spora.GRAPH_MODE if mode == "graph" else spora.PYNATIVE_MODE)
        net = nn.SequentialCell(nn.Dense(3072, 1024, activation="relu"), nn.Dense(1024, 1024, activation="relu"),
                                nn.Dense(1024, 10))
        model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01, momentum=0.9))
        epoch_seconds(model, data, 1)  # warm-up: compile, allocator, copy stream
        ratios, off, on = [], [], []
        for _ in range(args.rounds):
            a = epoch_seconds(model, data, 0)
            b = epoch_seconds(model, data, 1)
            off.append(a)
            on.append(b)
            ratios.append(a / b)
        ms = 1000.0 / args.batches
        print(f"{args.device} {mode} {source}: step {statistics.median(off) * ms:.3f} ms without the queue, "
              f"{statistics.median(on) * ms:.3f} ms with it; off/on {statistics.median(ratios):.3f} "
              f"(median of {args.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
