"""In-memory datasets of numpy arrays and the batching iterator Model uses.

NumpySlicesDataset((x, y), shuffle=True).batch(64) is re-iterable: each pass
is one epoch, reshuffled with a seeded generator so runs are reproducible.
The last smaller batch is kept unless drop_remainder=True.
"""
import numpy as np


class NumpySlicesDataset:
    """Rows of one or more equally long numpy arrays.

    data: an array or a tuple/list of arrays with the same first dimension.
    shuffle: reorder rows every epoch; seed makes the order reproducible.
    """

    def __init__(self, data, shuffle=False, seed=0):
        arrays = tuple(data) if isinstance(data, (tuple, list)) else (data,)
        if not arrays:
            raise ValueError("[dataset] NumpySlicesDataset needs at least one array")
        arrays = tuple(np.asarray(a) for a in arrays)
        n = arrays[0].shape[0] if arrays[0].ndim else 0
        for a in arrays:
            if a.ndim == 0 or a.shape[0] != n:
                raise ValueError("[dataset] NumpySlicesDataset: arrays differ in length: "
                                 + ", ".join(str(x.shape) for x in arrays))
        self.arrays = arrays
        self.shuffle = shuffle
        self._rng = np.random.default_rng(seed)

    def __len__(self):
        return self.arrays[0].shape[0]

    def _order(self):
        n = len(self)
        return self._rng.permutation(n) if self.shuffle else None

    def batch(self, batch_size, drop_remainder=False):
        """A re-iterable of tuples of numpy arrays, batch_size rows each."""
        return BatchDataset(self, batch_size, drop_remainder)

    def __iter__(self):
        order = self._order()
        for i in range(len(self)):
            j = i if order is None else order[i]
            row = tuple(a[j] for a in self.arrays)
            yield row if len(row) > 1 else row[0]


class BatchDataset:
    """Batches of a NumpySlicesDataset; len() is the number of batches."""

    def __init__(self, source, batch_size, drop_remainder=False):
        if int(batch_size) <= 0:
            raise ValueError(f"[dataset] batch_size must be positive, got {batch_size}")
        self.source = source
        self.batch_size = int(batch_size)
        self.drop_remainder = drop_remainder

    def __len__(self):
        n = len(self.source)
        full, rest = divmod(n, self.batch_size)
        return full + (1 if rest and not self.drop_remainder else 0)

    def get_dataset_size(self):
        """MindSpore's name for the number of batches per epoch."""
        return len(self)

    def __iter__(self):
        arrays = self.source.arrays
        order = self.source._order()
        n = len(self.source)
        for b in range(len(self)):
            lo, hi = b * self.batch_size, min(n, (b + 1) * self.batch_size)
            if order is None:
                batch = tuple(a[lo:hi] for a in arrays)
            else:
                idx = order[lo:hi]
                batch = tuple(a[idx] for a in arrays)
            yield batch if len(batch) > 1 else batch[0]
