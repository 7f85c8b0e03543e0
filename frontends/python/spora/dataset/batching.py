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
    num_shards, shard_id: keep only rows shard_id, shard_id + num_shards, ...
    of each epoch's order (data-parallel training: rank r of n passes
    num_shards=n, shard_id=r; with the same seed every rank shuffles alike,
    so the shards are disjoint and together cover each epoch). Shards of
    a dataset whose length num_shards does not divide differ in length by
    one row.
    """

    def __init__(self, data, shuffle=False, seed=0, num_shards=None, shard_id=None):
        arrays = tuple(data) if isinstance(data, (tuple, list)) else (data,)
        if not arrays:
            raise ValueError("[dataset] NumpySlicesDataset needs at least one array")
        arrays = tuple(np.asarray(a) for a in arrays)
        n = arrays[0].shape[0] if arrays[0].ndim else 0
        for a in arrays:
            if a.ndim == 0 or a.shape[0] != n:
                raise ValueError("[dataset] NumpySlicesDataset: arrays differ in length: "
                                 + ", ".join(str(x.shape) for x in arrays))
        if (num_shards is None) != (shard_id is None):
            raise ValueError("[dataset] NumpySlicesDataset: give both num_shards and shard_id, or neither")
        if num_shards is not None:
            num_shards, shard_id = int(num_shards), int(shard_id)
            if num_shards < 1 or not 0 <= shard_id < num_shards:
                raise ValueError(f"[dataset] NumpySlicesDataset: shard_id {shard_id} is not in [0, {num_shards})")
        self.arrays = arrays
        self.shuffle = shuffle
        self.num_shards, self.shard_id = num_shards, shard_id
        self._rng = np.random.default_rng(seed)

    def __len__(self):
        n = self.arrays[0].shape[0]
        if self.num_shards is None:
            return n
        return len(range(self.shard_id, n, self.num_shards))

    def _order(self):
        n = self.arrays[0].shape[0]
        order = self._rng.permutation(n) if self.shuffle else None
        if self.num_shards is None:
            return order
        if order is None:
            order = np.arange(n)
        return order[self.shard_id::self.num_shards]

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
