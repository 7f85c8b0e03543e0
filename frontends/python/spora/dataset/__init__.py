"""spora.dataset: datasets as iterables of numpy batches.

Model.train accepts any iterable of batches (tuples (x, y) of numpy arrays or
Tensors); this package adds the IDX reader for (Fashion-)MNIST and an
in-memory batching iterator.
"""
from .batching import BatchDataset, NumpySlicesDataset
from .fashion_mnist import CLASSES as FASHION_MNIST_CLASSES
from .fashion_mnist import load_fashion_mnist
from .idx import read_idx

__all__ = ["BatchDataset", "NumpySlicesDataset", "FASHION_MNIST_CLASSES",
           "load_fashion_mnist", "read_idx"]
