"""Pipeline efficiency against the bubble formula (issue 16 line 6;
docs/parallel.md, "Pipeline parallelism"): one rank per stage trains a
transformer of 2 blocks per stage with 1F1B and GPipe, for several
micro_size M at a fixed micro-batch, and prints the measured step time next
to the ideal one of equal stages, t_micro x (M + S - 1), where t_micro is
the slowest stage's measured compute (CPU seconds in its graphs) per
micro-batch; with fewer cores than stages the ideal is at least the total
compute of all stages divided by the cores. Also the measured bubble (the
share of each rank's step spent outside its own compute, averaged over
ranks) next to the ideal (S - 1) / (M + S - 1).

    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=build/python \\
        mpirun -np 4 --oversubscribe .venv/bin/python bench/pipeline_efficiency.py [d_model] [micro_batch]

Ranks share this machine's cores (4 ranks on 2 cores here): each takes
cores/ranks threads (at least one) and idle OpenMP threads sleep, so a
waiting stage leaves its core to the others.
"""
import os
import sys
import time

_local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
os.environ.setdefault("SPORA_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _local)))
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402

import spora  # noqa: E402
from spora import communication as comm  # noqa: E402
from spora import nn, ops  # noqa: E402


def isa():
    try:
        flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0]
    except (OSError, IndexError):
        return "unknown"
    return "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")


class Block(nn.Cell):
    def __init__(self, b, s, d, seed):
        super().__init__()
        self.B, self.S, self.D = b, s, d
        rng = np.random.default_rng(seed)

        def p(shape, name):
            return spora.Parameter(spora.Tensor((rng.standard_normal(shape) * 0.05).astype(np.float32)), name=name)

        self.wq, self.wk, self.wv, self.wo = (p((d, d), f"{n}{seed}") for n in ("wq", "wk", "wv", "wo"))
        self.w1, self.w2 = p((d, 4 * d), f"w1_{seed}"), p((4 * d, d), f"w2_{seed}")
        self.mm, self.bmm = ops.MatMul(), ops.BatchMatMul()

    def construct(self, x):
        B, S, D = self.B, self.S, self.D
        x2 = x.reshape(B * S, D)
        q, k, v = (self.mm(x2, w).reshape(B, S, D) for w in (self.wq, self.wk, self.wv))
        att = ops.softmax(self.bmm(q, k.transpose(0, 2, 1)) * (1.0 / np.sqrt(D)), -1)
        h = x2 + self.mm(self.bmm(att, v).reshape(B * S, D), self.wo)
        return (h + self.mm(ops.relu(self.mm(h, self.w1)), self.w2)).reshape(B, S, D)


class Net(nn.Cell):
    def __init__(self, stages, b, s, d):
        super().__init__()
        self.blocks = nn.CellList([Block(b, s, d, 10 + i) for i in range(2 * stages)])
        for i, blk in enumerate(self.blocks):
            blk.pipeline_stage = i // 2

    def construct(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


def measure(stages, scheduler, micro, b, s, d, reps=4):
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=stages,
                                    pipeline_scheduler=scheduler)
    net = Net(stages, b, s, d)
    opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
    step = spora.parallel.pipeline_train_step(nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), micro), opt)
    rng = np.random.default_rng(0)
    x = spora.Tensor(rng.standard_normal((micro * b, s, d)).astype(np.float32))
    y = spora.Tensor(rng.standard_normal((micro * b, s, d)).astype(np.float32))
    step(x, y).asnumpy()  # compile
    times, busy = [], []
    for _ in range(reps):
        comm.barrier()
        t0 = time.perf_counter()
        step(x, y).asnumpy()
        times.append(time.perf_counter() - t0)
        busy.append(step.stats["compute_s"])
    t, c = float(np.median(times)), float(np.median(busy))
    every = comm.all_gather(spora.Tensor(np.array([t, c], np.float64))).asnumpy()
    step_s = float(every[:, 0].max())
    t_micro = float(every[:, 1].max()) / micro  # the slowest stage's compute per micro-batch
    ideal = max(t_micro * (micro + stages - 1), float(every[:, 1].sum()) / min(stages, os.cpu_count() or 1))
    bubble = float(np.mean(1 - every[:, 1] / step_s))
    return step_s, ideal, bubble, (stages - 1) / (micro + stages - 1)


def main():
    d = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    b = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    s = 32
    comm.init("mpi")
    spora.set_context(mode=spora.GRAPH_MODE)
    stages, rank = comm.get_group_size(), comm.get_rank()
    if rank == 0:
        print(f"{stages} stages, one rank each ({os.environ['SPORA_NUM_THREADS']} threads, {os.cpu_count()} cores, "
              f"{isa()}); 2 transformer blocks (d {d}, seq {s}) per stage, micro-batch {b}, SGD")
        print(f"{'schedule':>8} {'M':>4} {'step ms':>9} {'ideal ms':>9} {'ideal/step':>10} "
              f"{'bubble':>7} {'ideal bubble':>12}")
    for scheduler in ("1f1b", "gpipe"):
        for micro in (stages, 2 * stages, 4 * stages, 8 * stages):
            step_s, ideal, bubble, ideal_bubble = measure(stages, scheduler, micro, b, s, d)
            if rank == 0:
                print(f"{scheduler:>8} {micro:>4} {step_s * 1e3:>9.2f} {ideal * 1e3:>9.2f} {ideal / step_s:>10.2f} "
                      f"{bubble:>7.2f} {ideal_bubble:>12.2f}", flush=True)
    comm.release()


if __name__ == "__main__":
    main()
