"""auto_parallel's cost model against reality (issue 15 line 6; docs/parallel.md
"Cost model"): measures this machine's per-rank matmul rate, memory bandwidth
and all_reduce latency/bandwidth, gives them to the strategy search, trains an
MLP and a transformer block under auto_parallel and prints, for each, the
predicted step time next to the measured one and their ratio.

    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=build/python \\
        mpirun -np 2 --oversubscribe .venv/bin/python bench/auto_parallel_calibrate.py [hidden] [batch]

Every rank runs the same measurements at the same time, so the rates are what
one rank gets while the others work too (ranks share this VM's 2 cores; each
takes cores/ranks threads, at least one).
The measured collectives are eager calls (Python overhead included); the
step's are graph-mode collectives, so the latency is an upper bound.
"""
import os
import sys
import time

# Ranks on one machine share its cores: as torchrun does (OMP_NUM_THREADS=1
# per rank), each rank takes its share of the cores, and idle OpenMP threads
# sleep instead of spinning, unless the caller chose otherwise. Without this,
# 4 ranks x 2 spinning threads on 2 cores measure a matmul rate 25x below
# 2 ranks' (4.7 vs 116 Gflop/s per rank, 2026-11-26).
_local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
os.environ.setdefault("SPORA_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _local)))
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402

import spora  # noqa: E402
from spora import communication as comm  # noqa: E402
from spora import nn, ops  # noqa: E402


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
    if size == 1:
        return 0.0, 1e12  # no link: the plan has no collectives
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


class Block(nn.Cell):
    """A pre-LN-free encoder block from primitives (the MPI tests' shape,
    larger): 4-head self-attention, residual, layer norm, feed-forward."""

    def __init__(self, b, s, d, h, f):
        super().__init__()
        self.B, self.S, self.D, self.H = b, s, d, h
        rng = np.random.default_rng(5)

        def p(shape, name):
            return spora.Parameter(spora.Tensor((rng.standard_normal(shape) * 0.05).astype(np.float32)), name=name)

        self.wq, self.wk, self.wv, self.wo = p((d, d), "wq"), p((d, d), "wk"), p((d, d), "wv"), p((d, d), "wo")
        self.w1, self.w2 = p((d, f), "w1"), p((f, d), "w2")
        self.gamma = spora.Parameter(spora.Tensor(np.ones(d, np.float32)), name="gamma")
        self.beta = spora.Parameter(spora.Tensor(np.zeros(d, np.float32)), name="beta")
        self.mm, self.bmm, self.relu = ops.MatMul(), ops.BatchMatMul(), ops.ReLU()

    def _heads(self, t):
        return t.reshape(self.B, self.S, self.H, self.D // self.H).transpose(0, 2, 1, 3)

    def construct(self, x):
        B, S, D = self.B, self.S, self.D
        x2 = x.reshape(B * S, D)
        q, k, v = (self._heads(self.mm(x2, w)) for w in (self.wq, self.wk, self.wv))
        att = ops.softmax(self.bmm(q, k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(D // self.H)), -1)
        ctx = self.bmm(att, v).transpose(0, 2, 1, 3).reshape(B * S, D)
        h = ops.layer_norm(x2 + self.mm(ctx, self.wo), (D,), self.gamma, self.beta)
        return (h + self.mm(self.relu(self.mm(h, self.w1)), self.w2)).reshape(B, S, D)


def calibrate(name, net, x, y, rank):
    """Trains net under auto_parallel (the context set by main) and prints
    the plan's predicted step time beside the measured one."""
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    grad_fn = spora.value_and_grad(lambda a, b: loss_fn(net(a), b), grad_position=None, weights=opt.parameters)

    @spora.jit
    def step(a, b):
        loss, grads = grad_fn(a, b)
        opt(grads)
        return loss

    x, y = spora.Tensor(x), spora.Tensor(y)
    for _ in range(3):
        step(x, y).asnumpy()
    measured = median_time(lambda: step(x, y).asnumpy(), reps=15)
    plan = step.last_plan["plan"]
    if rank == 0:
        split = [f"{w['name']} {w['layout']}" for w in step.last_plan["weights"] if "S" in w["layout"]]
        print(f"{name}: split weights {', '.join(split) or 'none'}")
        print(f"  predicted step {plan['step_time_s'] * 1e3:.3f} ms (compute {plan['compute_s'] * 1e3:.3f}, "
              f"communication {plan['comm_s'] * 1e3:.3f}); measured {measured * 1e3:.3f} ms; "
              f"measured/predicted {measured / plan['step_time_s']:.2f}")
    return measured / plan["step_time_s"]


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
    if rank == 0:
        print(f"ranks {size} ({os.environ['SPORA_NUM_THREADS']} threads each, {os.cpu_count()} cores); per rank: "
              f"matmul {flops / 1e9:.2f} Gflop/s, memory {membw / 1e9:.2f} GB/s; "
              f"all_reduce alpha {alpha * 1e6:.1f} us, bandwidth {linkbw / 1e9:.3f} GB/s")
    rng = np.random.default_rng(1)
    calibrate(f"MLP {d}-{hidden}-{d}, batch {batch}, momentum SGD", MLP(d, hidden),
              rng.standard_normal((batch, d)).astype(np.float32), rng.standard_normal((batch, d)).astype(np.float32),
              rank)
    b, s_, dm, h, f = 8, 64, 256, 4, 1024
    calibrate(f"transformer block b{b} s{s_} d{dm} h{h} ff{f}, momentum SGD", Block(b, s_, dm, h, f),
              rng.standard_normal((b, s_, dm)).astype(np.float32), rng.standard_normal((b, s_, dm)).astype(np.float32),
              rank)
    comm.release()


if __name__ == "__main__":
    main()
