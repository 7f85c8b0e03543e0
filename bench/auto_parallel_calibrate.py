"""auto_parallel's cost model against reality (issue 15 line 6; docs/parallel.md
"Cost model"): measures this machine's per-rank matmul rate, memory bandwidth
and all_reduce latency/bandwidth, gives them to the strategy search, trains an
MLP under auto_parallel and prints the predicted step time next to the
measured one.

    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=build/python \\
        mpirun -np 2 --oversubscribe .venv/bin/python bench/auto_parallel_calibrate.py [hidden] [batch]

Every rank runs the same measurements at the same time, so the rates are what
one rank gets while the others work too (2 ranks share this VM's 2 cores).
The measured collectives are eager calls (Python overhead included); the
step's are graph-mode collectives, so the latency is an upper bound.
"""
import sys
import time

import numpy as np

import spora
from spora import communication as comm
from spora import nn, ops


def median_time(fn, reps=7):
    times = []
    for _ in range(reps):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure_device():
    n = 384
    a = spora.Tensor(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    mm = spora.jit(lambda x: ops.matmul(x, x))
    mm(a).asnumpy()
    t = median_time(lambda: [mm(a) for _ in range(4)][-1].asnumpy())
    flops = 4 * 2.0 * n ** 3 / t
    big = spora.Tensor(np.ones(4 << 20, np.float32))
    add = spora.jit(lambda x: x + x)
    add(big).asnumpy()
    t = median_time(lambda: add(big).asnumpy())
    bandwidth = 3 * big.asnumpy().nbytes / t  # two reads (one tensor twice) and a write, plus the copy out
    return flops, bandwidth


def measure_link(size):
    small = spora.Tensor(np.ones(2, np.float32))
    t_small = median_time(lambda: comm.all_reduce(small, "sum").asnumpy(), reps=21)
    alpha = t_small / max(2 * (size - 1), 1)
    big = spora.Tensor(np.ones(1 << 20, np.float32))
    t_big = median_time(lambda: comm.all_reduce(big, "sum").asnumpy())
    s = 4.0 * (1 << 20)
    beta_time = max(t_big - 2 * (size - 1) * alpha, 1e-9)
    bandwidth = 2 * (size - 1) / size * s / beta_time
    return alpha, bandwidth


class MLP(nn.Cell):
    def __init__(self, d, hidden):
        super().__init__()
        rng = np.random.default_rng(7)
        self.w1 = spora.Parameter(spora.Tensor((rng.standard_normal((d, hidden)) * 0.05).astype(np.float32)), name="w1")
        self.w2 = spora.Parameter(spora.Tensor((rng.standard_normal((hidden, d)) * 0.05).astype(np.float32)), name="w2")
        self.mm1, self.mm2, self.relu = ops.MatMul(), ops.MatMul(), ops.ReLU()

    def construct(self, x):
        return self.mm2(self.relu(self.mm1(x, self.w1)), self.w2)


def main():
    hidden = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    d = 256
    comm.init("mpi")
    size, rank = comm.get_group_size(), comm.get_rank()
    spora.set_context(mode=spora.GRAPH_MODE)
    flops, membw = measure_device()
    alpha, linkbw = measure_link(size)
    spora.set_auto_parallel_context(
        parallel_mode="auto_parallel", search_mode="dynamic_programming", device_num=size,
        device_spec={"peak_flops": flops, "mem_bandwidth": membw, "memory_bytes": 64e9},
        topology={"devices_per_node": size, "intra_bandwidth": linkbw, "intra_latency": alpha,
                  "inter_bandwidth": linkbw, "inter_latency": alpha})
    net = MLP(d, hidden)
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    grad_fn = spora.value_and_grad(lambda x, y: loss_fn(net(x), y), grad_position=None, weights=opt.parameters)

    @spora.jit
    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    rng = np.random.default_rng(1)
    x = spora.Tensor(rng.standard_normal((batch, d)).astype(np.float32))
    y = spora.Tensor(rng.standard_normal((batch, d)).astype(np.float32))
    for _ in range(3):
        step(x, y).asnumpy()
    measured = median_time(lambda: step(x, y).asnumpy(), reps=15)
    plan = step.last_plan["plan"]
    if rank == 0:
        print(f"ranks {size}; per rank: matmul {flops / 1e9:.2f} Gflop/s, memory {membw / 1e9:.2f} GB/s; "
              f"all_reduce alpha {alpha * 1e6:.1f} us, bandwidth {linkbw / 1e9:.3f} GB/s")
        print(f"MLP {d}-{hidden}-{d}, batch {batch}, momentum SGD: weights "
              + ", ".join(f"{w['name']} {w['layout']}" for w in step.last_plan["weights"]))
        print(f"predicted step {plan['step_time_s'] * 1e3:.3f} ms (compute {plan['compute_s'] * 1e3:.3f}, "
              f"communication {plan['comm_s'] * 1e3:.3f}); measured {measured * 1e3:.3f} ms; "
              f"measured/predicted {measured / plan['step_time_s']:.2f}")
    comm.release()


if __name__ == "__main__":
    main()
