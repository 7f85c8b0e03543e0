"""spora.dataset: data pipelines in the style of mindspore.dataset.

    import spora.dataset as ds
    from spora.dataset import vision, transforms
    train = ds.MnistDataset("MNIST_Data/train")           # image (28, 28, 1) uint8, label
    train = train.map([vision.Rescale(1 / 255, 0), vision.HWC2CHW()], input_columns="image",
                      num_parallel_workers=2).batch(64, drop_remainder=True)
    for images, labels in train.create_tuple_iterator(): ...   # spora Tensors

Sources read IDX files (MNIST, Fashion-MNIST), in-memory arrays, or Python
(GeneratorDataset); map runs the built-in transforms (spora.dataset.vision,
spora.dataset.transforms) on C++ worker threads, Python functions on
Python threads or worker processes; shuffle/batch/repeat and a bounded
prefetch queue follow. The older helpers (load_fashion_mnist, read_idx)
stay.
"""
from . import config, text, transforms, vision
from .engine import BatchDataset, Dataset
from .csv_source import CSVDataset, Shuffle
from .fashion_mnist import CLASSES as FASHION_MNIST_CLASSES
from .fashion_mnist import load_fashion_mnist
from .generator import GeneratorDataset
from .idx import read_idx
from .image_folder import ImageFolderDataset
from .samplers import (DistributedSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                       SubsetSampler)
from .sources import FashionMnistDataset, MnistDataset, NumpySlicesDataset

__all__ = ["Dataset", "BatchDataset", "NumpySlicesDataset", "MnistDataset", "FashionMnistDataset",
           "GeneratorDataset", "CSVDataset", "ImageFolderDataset", "Shuffle", "Sampler", "SequentialSampler", "RandomSampler", "DistributedSampler",
           "SubsetSampler", "SubsetRandomSampler",
           "FASHION_MNIST_CLASSES", "load_fashion_mnist", "read_idx", "config", "text", "transforms", "vision"]
