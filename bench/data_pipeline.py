#!/usr/bin/env python3
"""Input pipeline throughput: spora.dataset vs torch.utils.data.DataLoader.

    PYTHONPATH=build/python .venv/bin/python bench/data_pipeline.py [--samples 60000] [--rounds 3]

The same work on both sides, per sample of Fashion-MNIST's training split:
uint8 28x28 image -> float32 (x / 255 - mean) / std -> pad 4 + random 28x28
crop -> random horizontal flip -> CHW; batches of 64 (images and int labels).
Spora runs it in its C++ pipeline (FashionMnistDataset -> map on N worker
threads -> batch -> prefetch); PyTorch in a map-style Dataset whose
__getitem__ does the same with torch ops, batched by a DataLoader with N
worker processes (num_workers=0 too, its in-process mode). Both read the
same decoded arrays (the IDX decode is timed separately for spora). The
figure is samples/s over `--samples` samples (best of --rounds); the ratio
is spora / torch at equal worker counts. Without PyTorch the torch half is
skipped.
"""
import argparse
import os
import time

import numpy as np

import spora.dataset as ds
from spora.dataset import vision

ROOT = os.environ.get("SPORA_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training pixels, on the 0..1 scale


def spora_pipeline(workers, limit):
    d = ds.FashionMnistDataset(ROOT, usage="train", shuffle=True)
    d = d.map([vision.Normalize([255 * MEAN], [255 * STD]), vision.RandomCrop(28, padding=4),
               vision.RandomHorizontalFlip(), vision.HWC2CHW()], input_columns="image",
              num_parallel_workers=workers)
    return d.batch(64, drop_remainder=True), limit


def run_spora(workers, limit):
    d, limit = spora_pipeline(workers, limit)
    n = 0
    t = time.perf_counter()
    for x, y in d.create_tuple_iterator(output_numpy=True):
        n += len(y)
        if n >= limit:
            break
    return n / (time.perf_counter() - t)


def torch_loader(workers, images, labels):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class FM(Dataset):
        def __init__(self):
            self.x = torch.from_numpy(images)
            self.y = torch.from_numpy(labels.astype(np.int64))

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            img = (self.x[i].float() / 255.0 - MEAN) / STD
            img = torch.nn.functional.pad(img, (4, 4, 4, 4))
            top, left = torch.randint(0, 9, (2,)).tolist()
            img = img[top:top + 28, left:left + 28]
            if torch.rand(()) < 0.5:
                img = img.flip(1)
            return img.unsqueeze(0), self.y[i]

    return DataLoader(FM(), batch_size=64, shuffle=True, drop_last=True, num_workers=workers,
                      persistent_workers=False)


def run_torch(workers, images, labels, limit):
    loader = torch_loader(workers, images, labels)
    n = 0
    t = time.perf_counter()
    for x, y in loader:
        n += len(y)
        if n >= limit:
            break
    return n / (time.perf_counter() - t)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=60000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    try:
        import torch
        torch.set_num_threads(1)  # per-sample ops: threads only add overhead
    except ImportError:
        torch = None
        print("PyTorch not installed: spora only")

    t = time.perf_counter()
    d = ds.FashionMnistDataset(ROOT, usage="train", shuffle=False)
    (images, labels), = list(d.batch(60000))
    print(f"IDX decode (gzip + parse, 60000 images, through the pipeline): {time.perf_counter() - t:.2f} s")

    rows = []
    for workers in (1, 2):
        s = max(run_spora(workers, args.samples) for _ in range(args.rounds))
        tt = (max(run_torch(workers, images, labels, args.samples) for _ in range(args.rounds))
              if torch else None)
        rows.append((workers, s, tt))
    if torch:
        t0 = max(run_torch(0, images, labels, args.samples) for _ in range(args.rounds))
    print(f"{'workers':>8} {'spora samples/s':>16} {'torch samples/s':>16} {'ratio':>7}")
    for w, s, tt in rows:
        print(f"{w:>8} {s:>16,.0f} {tt if tt is None else format(tt, ',.0f'):>16} "
              f"{'' if tt is None else format(s / tt, '.1f') + 'x':>7}")
    if torch:
        print(f"torch num_workers=0 (in process): {t0:,.0f} samples/s")


if __name__ == "__main__":
    main()
