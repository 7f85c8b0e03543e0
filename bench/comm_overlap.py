"""How much of the gradient all-reduce a data-parallel training step hides
behind backward (issue 17, line 3; sched/plan_overlap.cpp).

Run with two or more ranks, e.g.:

  SPORA_SIM_KERNEL_US=300 spora launch -n 2 -- python bench/comm_overlap.py --device sim
  spora launch -n 2 -- python bench/comm_overlap.py --device cpu

Rank 0 prints, for one MLP training step in graph mode (momentum SGD,
gradients averaged in buckets of --bucket-mb):

  compute   the same step without data parallelism (no collective)
  comm      the buckets' all_reduces alone, back to back
  off       the data-parallel step with SPORA_COMM_OVERLAP=0 (each bucket
            waited for where it is)
  on        the data-parallel step with overlap (the default)
  hidden    of the time the overlapped collectives ran, the share the step
            did not wait for them (spora.communication.overlap_stats():
            1 - exposed / busy, measured inside the runs)
  saved     (off - on) / comm: the wall-clock saving over the collectives'
            own time

sim devices stand for a GPU: with SPORA_SIM_KERNEL_US each kernel lasts that
long on the device without using a host core, so the collective thread runs
beside it. On cpu the kernels and the collective share the host's cores.
Medians of --steps timed steps after warm-up; every figure is from one run.
"""
import argparse
import os
import platform
import statistics
import time

import numpy as np

import spora
from spora import nn
from spora import communication as comm
from spora.nn import DistributedGradReducer


def cpu_isa():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return platform.machine()
    isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "SSE"
    return isa + (" +bf16" if "avx512_bf16" in flags else "")


class Mlp(nn.Cell):
    def __init__(self, width, layers):
        super().__init__()
        self.body = nn.SequentialCell([nn.Dense(width, width, activation="relu") for _ in range(layers)])
        self.head = nn.Dense(width, 10)

    def construct(self, x):
        return self.head(self.body(x))


def make_step(width, layers, data_parallel):
    net = Mlp(width, layers)
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)
    reducer = DistributedGradReducer(opt.parameters, mean=True) if data_parallel else None

    def step(x, y):
        loss, grads = grad_fn(x, y)
        if reducer is not None:
            grads = reducer(grads)
        opt(grads)
        return loss

    return spora.jit(step), net


def time_step(step, x, y, warmup, steps):
    for _ in range(warmup):
        step(x, y).asnumpy()
    comm.barrier()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step(x, y).asnumpy()
        times.append(time.perf_counter() - t0)
    comm.barrier()
    return statistics.median(times)


def time_comm(sizes, device, warmup, steps):
    bufs = [spora.ops.ones((n,), spora.float32, device=device) for n in sizes]
    def once():
        for b in bufs:
            comm.all_reduce(b)
        bufs[-1].asnumpy()
    for _ in range(warmup):
        once()
    comm.barrier()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    comm.barrier()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="sim")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32, help="rows per rank")
    ap.add_argument("--bucket-mb", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()

    os.environ["SPORA_ALLREDUCE_BUCKET_MB"] = str(a.bucket_mb)
    spora.set_context(mode=spora.GRAPH_MODE, device_target=a.device)
    comm.init("mpi")
    rank, size = comm.get_rank(), comm.get_group_size()
    rng = np.random.default_rng(rank)
    x = spora.Tensor(rng.standard_normal((a.batch, a.width)).astype(np.float32), device=a.device)
    y = spora.Tensor(rng.integers(0, 10, a.batch).astype(np.int32), device=a.device)

    spora.reset_auto_parallel_context()
    compute_step, net = make_step(a.width, a.layers, False)
    t_compute = time_step(compute_step, x, y, a.warmup, a.steps)

    # The buckets allreduce_fusion makes: gradients in backward order, packed
    # up to bucket-mb (the weights of one layer are never split).
    grads = [int(np.prod(p.shape)) for p in net.trainable_params()][::-1]
    limit = a.bucket_mb * 1024 * 1024 / 4
    sizes, cur = [], 0
    for n in grads:
        if cur and cur + n > limit:
            sizes.append(cur)
            cur = 0
        cur += n
    sizes.append(cur)
    t_comm = time_comm(sizes, a.device, a.warmup, a.steps)

    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    os.environ["SPORA_COMM_OVERLAP"] = "0"
    off_step, _ = make_step(a.width, a.layers, True)
    t_off = time_step(off_step, x, y, a.warmup, a.steps)
    os.environ["SPORA_COMM_OVERLAP"] = "1"
    on_step, _ = make_step(a.width, a.layers, True)
    for _ in range(a.warmup):
        on_step(x, y).asnumpy()
    comm.overlap_stats(reset=True)
    t_on = time_step(on_step, x, y, 0, a.steps)
    busy, exposed, hidden = comm.overlap_stats()
    spora.reset_auto_parallel_context()

    if rank == 0:
        kus = os.environ.get("SPORA_SIM_KERNEL_US", "0") if a.device.startswith("sim") else "-"
        print(f"comm_overlap: {size} ranks, device {a.device} (kernel_us {kus}), cpu {cpu_isa()}, "
              f"{os.cpu_count()} cores; MLP {a.layers}x{a.width}, batch {a.batch}/rank, "
              f"{sum(sizes) * 4 / 2**20:.1f} MiB of gradients in {len(sizes)} buckets")
        print(f"  compute {t_compute * 1e3:8.2f} ms   comm {t_comm * 1e3:8.2f} ms   "
              f"off {t_off * 1e3:8.2f} ms   on {t_on * 1e3:8.2f} ms")
        print(f"  hidden {hidden * 100:.0f} % of the collectives' time ({busy / a.steps * 1e3:.2f} ms per step, "
              f"{exposed / a.steps * 1e3:.2f} ms waited; goal >= 70 % when compute >= comm, "
              f"compute/comm = {t_compute / t_comm:.2f}); saved (off - on) / comm = {(t_off - t_on) / t_comm * 100:.0f} %")
    comm.release()


if __name__ == "__main__":
    main()
