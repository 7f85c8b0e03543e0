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


def _read_split(paths):
    """(images, labels) of one split's two IDX files, through the C++ IDX
    reader (it validates the files and checks the sample counts agree)."""
    h = _C.Dataset.from_idx(paths, ["image", "label"], [0, dtype_code("int32")])
    n = h.size()
    if n == 0:
        raise ValueError(f"[dataset] {paths[0]} holds no samples")
    img, lbl = next(iter(h.batch(n, False).iterate("cpu", 0, 1)))
    return img.asnumpy(), lbl.asnumpy()


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
    """MNIST-format IDX files (plain or .gz) in dataset_dir, as MindSpore's.

    Columns: "image" uint8 (28, 28, 1) -- HWC, one channel; HWC2CHW makes
    it (1, 28, 28) -- and "label" int32 (MindSpore's is uint32, a type spora
    lacks). usage: "train" (train-images-idx3-ubyte, ...), "test"
    (t10k-...), or "all"/None (the default): whichever of the two the
    directory holds, train first. shuffle (default True): a new global order
    each epoch; num_shards/shard_id: a disjoint slice of it per process.
    """

    _what = "MnistDataset"

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None, shuffle=None,
                 sampler=None, num_shards=None, shard_id=None, cache=None, seed=None):
        if usage not in (None, "all") and usage not in _SPLITS:
            raise ValueError(f"[{self._what}] usage must be 'train', 'test', 'all' or None, got {usage!r}")
        if num_samples is not None or sampler is not None or cache is not None:
            raise TypeError(f"[{self._what}] num_samples, sampler and cache are not supported; take fewer samples "
                            "with .take(n) after the source, shard with num_shards/shard_id")
        dataset_dir = os.fspath(dataset_dir)
        if usage in _SPLITS:
            splits = [usage]
        else:
            splits = [u for u in ("train", "test") if self._present(dataset_dir, _SPLITS[u])]
            if not splits:
                raise FileNotFoundError(
                    f"[{self._what}] no MNIST files in {dataset_dir}: expected train-images-idx3-ubyte and "
                    "train-labels-idx1-ubyte and/or t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (or .gz)"
                    + self._hint())
        images, labels = [], []
        for u in splits:
            img, lbl = _read_split([self._find(dataset_dir, name) for name in _SPLITS[u]])
            if img.ndim != 3:
                raise ValueError(f"[{self._what}] {_SPLITS[u][0]} in {dataset_dir}: images of shape "
                                 f"{img.shape[1:]}, expected (rows, cols)")
            images.append(img[..., None])
            labels.append(lbl)
        image = images[0] if len(images) == 1 else np.concatenate(images)
        label = labels[0] if len(labels) == 1 else np.concatenate(labels)
        handle = _C.Dataset.from_tensors([_C.Tensor(np.ascontiguousarray(image)), _C.Tensor(label)],
                                         ["image", "label"])
        shuffle = True if shuffle is None else shuffle
        super().__init__(_sampled(handle, shuffle, seed, num_shards, shard_id, self._what))
        self.dataset_dir, self.usage = dataset_dir, usage

    @staticmethod
    def _present(root, names):
        return all(os.path.exists(os.path.join(root, n)) or os.path.exists(os.path.join(root, n + ".gz"))
                   for n in names)

    def _hint(self):
        return ""

    def _find(self, root, name):
        for candidate in (name, name + ".gz"):
            path = os.path.join(root, candidate)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"[{self._what}] {name}(.gz) not found in {root}" + self._hint())


class FashionMnistDataset(MnistDataset):
    """Fashion-MNIST (same layout as MnistDataset). dataset_dir defaults to
    $SPORA_FASHION_MNIST or Debian's dataset-fashion-mnist directory
    (/usr/share/datasets/fashion-mnist)."""

    _what = "FashionMnistDataset"
    CLASSES = CLASSES

    def __init__(self, dataset_dir=None, usage=None, **kwargs):
        dataset_dir = dataset_dir or os.environ.get("SPORA_FASHION_MNIST") or DEFAULT_ROOT
        super().__init__(dataset_dir, usage, **kwargs)

    def _hint(self):
        return "; install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass dataset_dir"
