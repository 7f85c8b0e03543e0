"""One GPU, one rank: does a graph's NCCL all_reduce run beside the kernels
after it (on the communication stream) instead of in line? Times a jit step
with an all_reduce of --mb MiB and an independent matmul chain, overlap on
(SPORA_COMM_OVERLAP=1) and off, and the two parts alone. With one rank NCCL's
all_reduce is a device copy, so this checks the streams and events, not the
network. Usage: python bench/gpu/nccl_overlap.py [--mb 1024] [--n 4096] [--steps 20]"""
import argparse
import os
import statistics
import time

import numpy as np

import spora
from spora import communication as comm


def timed(f, args, steps):
    f(*args).asnumpy()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        f(*args).asnumpy()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    spora.set_context(device_target="cuda", mode=spora.GRAPH_MODE)
    comm.init("nccl")
    big = spora.ops.ones((a.mb * 262144,), spora.float32, device="cuda")
    m = spora.Tensor((np.random.default_rng(0).standard_normal((a.n, a.n)) / a.n).astype(np.float32), device="cuda")

    def chain(b):
        return spora.ops.matmul(spora.ops.matmul(spora.ops.matmul(b, b), b), b).sum()

    res = {}
    for overlap in ("1", "0"):
        os.environ["SPORA_COMM_OVERLAP"] = overlap

        @spora.jit
        def both(x, b):
            r = comm.all_reduce(x)
            z = chain(b)  # traced before r's first reader: the kernels after the all_reduce
            return r[:4] + z
        res[overlap] = timed(both, (big, m), a.steps)
        res["coll" + overlap] = both.last_executable.collectives()

    @spora.jit
    def only_comm(x):
        return comm.all_reduce(x)[:4]

    @spora.jit
    def only_mm(b):
        return chain(b)
    t_c, t_m = timed(only_comm, (big,), a.steps), timed(only_mm, (m,), a.steps)
    print(f"nccl_overlap: 1 rank, all_reduce {a.mb} MiB, 4 matmuls {a.n}^2 f32")
    print(f"  all_reduce alone {t_c * 1e3:.2f} ms, matmuls alone {t_m * 1e3:.2f} ms, sum {(t_c + t_m) * 1e3:.2f} ms")
    print(f"  step overlap off {res['0'] * 1e3:.2f} ms {res['coll0']}, on {res['1'] * 1e3:.2f} ms {res['coll1']}; "
          f"hidden {(res['0'] - res['1']) / t_c * 100:.0f} % of the all_reduce")
    comm.release()


if __name__ == "__main__":
    main()
