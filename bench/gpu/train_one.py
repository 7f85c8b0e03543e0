"""One training row of bench_gpu.py on one device, Spora only: samples/s and peak memory.

    python bench/gpu/train_one.py DEVICE "MODEL" [SCALE] [STEPS]
    e.g.  python bench/gpu/train_one.py cuda "lenet5 b64"
          SPORA_LOG_LEVEL=debug python bench/gpu/train_one.py sim "transformer b32 bf16" 0.25 2

MODEL is a row name of bench_gpu.py (mlp b128, lenet5 b64, mainjob b64,
transformer b32 bf16, mlp 4x4096 b2048). For looking at one model: its
compiled plan, CUDA-graph recording (SPORA_LOG_LEVEL=debug), peak memory.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpu  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    device, model = sys.argv[1], sys.argv[2]
    scale = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 12
    fw = bench_gpu.SporaFw(device)
    t0 = time.time()
    rate, peak = fw.train(model, scale, steps)
    peak_s = f"{peak / 2**20:.1f} MiB" if peak else "n/a"
    print(f"{model} on {device} (scale {scale}): {rate:,.1f} samples/s, peak {peak_s}, {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
