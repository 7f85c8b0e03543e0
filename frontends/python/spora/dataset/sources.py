"""Source datasets: in-memory arrays (NumpySlicesDataset) and the IDX files
of MNIST and Fashion-MNIST (MnistDataset, FashionMnistDataset)."""
import os

import numpy as np

from .. import _C
from .._dtype import dtype_code
from . import config
from .engine import Dataset
from .fashion_mnist import CLASSES, DEFAULT_ROOT

_SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _sampled(handle, shuffle, seed, num_shards, shard_id, where):
    if (num_shards is None) != (shard_id is None):
        raise ValueError(f"[{where}] num_shards and shard_id go together (got num_shards={num_shards}, "
                         f"shard_id={shard_id})")
    shards = 1 if num_shards is None else int(num_shards)
    sid = 0 if shard_id is None else int(shard_id)
    if shards < 1 or not 0 <= sid < shards:
        raise ValueError(f"[{where}] shard_id {sid} is not in [0, {shards}) (num_shards={shards})")
    return handle.sampler(bool(shuffle), int(config.get_seed() if seed is None else seed), shards, sid)


class NumpySlicesDataset(Dataset):
    """Rows of one or more equally long arrays (NumPy arrays, lists, Tensors).

    data: an array, a tuple/list of arrays, or a dict {column name: array}.
    column_names: names for a tuple/list (default "column_0", ...).
    shuffle: a new order every epoch (seed: default spora.dataset.config's).
    num_shards / shard_id: this process's disjoint slice (data parallel).
    """

    def __init__(self, data, column_names=None, shuffle=False, num_shards=None, shard_id=None,
                 num_parallel_workers=None, seed=None):
        if isinstance(column_names, bool):  # NumpySlicesDataset(data, True): the first API's shuffle
            column_names, shuffle = None, column_names
        if isinstance(data, dict):
            names, arrays = list(data.keys()), list(data.values())
        else:
            arrays = list(data) if isinstance(data, (tuple, list)) else [data]
            names = list(column_names) if column_names else [f"column_{i}" for i in range(len(arrays))]
        if not arrays:
            raise ValueError("[dataset] NumpySlicesDataset needs at least one array")
        if len(names) != len(arrays):
            raise ValueError(f"[dataset] NumpySlicesDataset: {len(names)} column names for {len(arrays)} arrays")
        arrays = [a.asnumpy() if hasattr(a, "asnumpy") else np.asarray(a) for a in arrays]
        n = arrays[0].shape[0] if arrays[0].ndim else 0
        for a in arrays:
            if a.ndim == 0 or a.shape[0] != n:
                raise ValueError("[dataset] NumpySlicesDataset: arrays differ in length: "
                                 + ", ".join(str(x.shape) for x in arrays))
        tensors = []
        for a in arrays:
            dtype_code(a.dtype)  # TypeError naming the dtype when spora lacks it
            tensors.append(_C.Tensor(np.ascontiguousarray(a)))
        handle = _C.Dataset.from_tensors(tensors, names)
        super().__init__(_sampled(handle, shuffle, seed, num_shards, shard_id, "NumpySlicesDataset"))
        self.arrays = tuple(arrays)


class MnistDataset(Dataset):
    """MNIST-format IDX files (plain or .gz) in dataset_dir.

    Columns: "image" uint8 (28, 28) -- HW, one channel: vision transforms
    take it as is and HWC2CHW makes it (1, 28, 28) -- and "label" int32.
    usage: "train" or "test". shuffle (default True): a new global order
    each epoch; num_shards/shard_id: a disjoint slice of it per process.
    """

    _what = "MnistDataset"

    def __init__(self, dataset_dir, usage="train", num_samples=None, num_parallel_workers=None, shuffle=None,
                 sampler=None, num_shards=None, shard_id=None, seed=None):
        if usage not in _SPLITS:
            raise ValueError(f"[{self._what}] usage must be 'train' or 'test', got {usage!r}")
        if num_samples is not None or sampler is not None:
            raise TypeError(f"[{self._what}] num_samples and sampler are not supported")
        dataset_dir = os.fspath(dataset_dir)
        paths = [self._find(dataset_dir, name) for name in _SPLITS[usage]]
        handle = _C.Dataset.from_idx(paths, ["image", "label"], [0, dtype_code("int32")])
        shuffle = True if shuffle is None else shuffle
        super().__init__(_sampled(handle, shuffle, seed, num_shards, shard_id, self._what))
        self.dataset_dir, self.usage = dataset_dir, usage

    def _find(self, root, name):
        for candidate in (name, name + ".gz"):
            path = os.path.join(root, candidate)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"[{self._what}] {name}(.gz) not found in {root}")


class FashionMnistDataset(MnistDataset):
    """Fashion-MNIST (same layout as MnistDataset). dataset_dir defaults to
    $SPORA_FASHION_MNIST or Debian's dataset-fashion-mnist directory
    (/usr/share/datasets/fashion-mnist)."""

    _what = "FashionMnistDataset"
    CLASSES = CLASSES

    def __init__(self, dataset_dir=None, usage="train", **kwargs):
        dataset_dir = dataset_dir or os.environ.get("SPORA_FASHION_MNIST") or DEFAULT_ROOT
        super().__init__(dataset_dir, usage, **kwargs)

    def _find(self, root, name):
        try:
            return super()._find(root, name)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{e}; install Debian's dataset-fashion-mnist (apt-get install "
                                    "dataset-fashion-mnist) or pass dataset_dir") from None
