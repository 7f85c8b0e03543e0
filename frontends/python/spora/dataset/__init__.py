"""spora.dataset: data pipelines in the style of mindspore.dataset.

    import spora.dataset as ds
    from spora.dataset import vision, transforms
    train = ds.FashionMnistDataset(usage="train", shuffle=True)
    train = train.map([vision.Rescale(1 / 255, 0), vision.HWC2CHW()], input_columns="image",
                      num_parallel_workers=2).batch(64, drop_remainder=True)
    for images, labels in train: ...          # NumPy arrays (what Model.train takes)

Sources read IDX files (MNIST, Fashion-MNIST) or in-memory arrays; map runs
the built-in transforms (spora.dataset.vision, spora.dataset.transforms) on
C++ worker threads; shuffle/batch/repeat and a bounded prefetch queue
follow. The older helpers (load_fashion_mnist, read_idx) stay.
"""
from . import config, transforms, vision
from .engine import BatchDataset, Dataset
from .fashion_mnist import CLASSES as FASHION_MNIST_CLASSES
from .fashion_mnist import load_fashion_mnist
from .idx import read_idx
from .sources import FashionMnistDataset, MnistDataset, NumpySlicesDataset

__all__ = ["Dataset", "BatchDataset", "NumpySlicesDataset", "MnistDataset", "FashionMnistDataset",
           "FASHION_MNIST_CLASSES", "load_fashion_mnist", "read_idx", "config", "transforms", "vision"]
