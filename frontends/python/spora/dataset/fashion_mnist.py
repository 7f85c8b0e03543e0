"""Fashion-MNIST from local IDX files (Debian's dataset-fashion-mnist package).

No download: the files are looked up in `root`, in $SPORA_FASHION_MNIST, then
in /usr/share/datasets/fashion-mnist, each name plain or gzipped.
"""
import os

import numpy as np

from .idx import read_idx

DEFAULT_ROOT = "/usr/share/datasets/fashion-mnist"

CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _find(root, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(root, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"[dataset] Fashion-MNIST file {name}(.gz) not found in {root}; "
        "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
        "or pass root= / set SPORA_FASHION_MNIST")


def load_fashion_mnist(split="train", root=None, normalize=True):
    """Return (images, labels) for split "train" (60000) or "test" (10000).

    images: float32 (N, 1, 28, 28) scaled to [0, 1] (uint8 (N, 28, 28) with
    normalize=False); labels: int32 (N,). Raises ValueError for an unknown
    split or when the image and label files disagree in length.
    """
    if split not in _FILES:
        raise ValueError(f"[dataset] unknown Fashion-MNIST split {split!r}; use 'train' or 'test'")
    root = root or os.environ.get("SPORA_FASHION_MNIST") or DEFAULT_ROOT
    img_name, lbl_name = _FILES[split]
    images = read_idx(_find(root, img_name))
    labels = read_idx(_find(root, lbl_name))
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise ValueError(f"[dataset] Fashion-MNIST {split}: images {images.shape} and labels "
                         f"{labels.shape} do not match")
    labels = labels.astype(np.int32)
    if not normalize:
        return images, labels
    return (images.astype(np.float32) / 255.0)[:, None, :, :], labels
