"""Data-parallel training throughput: the same MLP (784-512-512-10, SGD
momentum, GRAPH_MODE) on the same global batch, as one process or as N
ranks each training on 1/N of every batch with gradients averaged.

    PYTHONPATH=build/python SPORA_NUM_THREADS=2 .venv/bin/python bench/data_parallel_train.py
    PYTHONPATH=build/python SPORA_NUM_THREADS=1 mpirun -np 2 --oversubscribe .venv/bin/python bench/data_parallel_train.py

Rank 0 prints global samples/s (median of 5 timed epochs) and the time the
gradient all-reduce takes per step (measured separately, same buckets).
"""
import time

import numpy as np

import spora
from spora import communication as comm
from spora import nn
from spora.dataset import NumpySlicesDataset
from spora.train import Model

GLOBAL_BATCH, STEPS = 128, 40

comm.init()
rank, size = comm.get_rank(), comm.get_group_size()
spora.set_context(mode=spora.GRAPH_MODE)
if size > 1:
    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)

rng = np.random.default_rng(0)
x = rng.standard_normal((GLOBAL_BATCH * STEPS, 784)).astype(np.float32)
y = rng.integers(0, 10, GLOBAL_BATCH * STEPS).astype(np.int32)
data = NumpySlicesDataset((x, y), num_shards=size, shard_id=rank).batch(GLOBAL_BATCH // size)

net = nn.SequentialCell([nn.Dense(784, 512, activation="relu"), nn.Dense(512, 512, activation="relu"),
                         nn.Dense(512, 10)])
model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.01, 0.9))
model.train(1, data)  # compile
times = []
for _ in range(5):
    comm.barrier()
    t0 = time.perf_counter()
    model.train(1, data)
    comm.barrier()
    times.append(time.perf_counter() - t0)
sps = GLOBAL_BATCH * STEPS / float(np.median(times))

reduce_us = 0.0
if size > 1:
    reducer = nn.DistributedGradReducer(net.trainable_params(), mean=True)
    grads = [spora.ops.zeros_like(p) for p in net.trainable_params()]
    reducer(grads)
    comm.barrier()
    t0 = time.perf_counter()
    for _ in range(20):
        reducer(grads)
    reduce_us = (time.perf_counter() - t0) / 20 * 1e6
if rank == 0:
    print(f"ranks {size}: {sps:,.0f} samples/s (global batch {GLOBAL_BATCH}); "
          f"gradient all-reduce (eager, 669,706 f32) {reduce_us:,.0f} us/step")
comm.release()
