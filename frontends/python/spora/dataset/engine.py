"""Dataset: the MindSpore-style pipeline over the C++ data engine.

Every step (map, shuffle, batch, repeat) returns a new Dataset wrapping an
immutable C++ description (spora._C.Dataset); iterating starts a C++
iterator whose producer thread and map() workers run outside the GIL, with
a bounded prefetch queue.

Epochs. Each pass over a Dataset (each `for` loop, each epoch of a
create_*_iterator) is the next epoch number of that Dataset object, and
every random choice is keyed by (seed, epoch, sample): two runs with the
same seed and the same calls see the same data, for any worker count.

Iterating a Dataset directly (`for x, y in ds`, what spora.train.Model
does) yields tuples of NumPy arrays (one bare array when there is one
column). create_tuple_iterator() / create_dict_iterator() yield spora
Tensors unless output_numpy=True, as in MindSpore.
"""
import numpy as np

from .. import _C
from . import config
from .transforms import Transform


def _check_columns(names, cols, where):
    if cols is None:
        return []
    if isinstance(cols, str):
        cols = [cols]
    cols = list(cols)
    for c in cols:
        if c not in names:
            raise ValueError(f"[dataset {where}] no column {c!r} (columns: {', '.join(names)})")
    return cols


class Dataset:
    """Base of every dataset; wraps a spora._C.Dataset description."""

    def __init__(self, handle, parent=None):
        self._h = handle
        self._parent = parent
        self._epoch = 0

    # -- pipeline steps --------------------------------------------------------------------

    def map(self, operations, input_columns=None, num_parallel_workers=None, **unsupported):
        """Applies `operations` (a transform or a list, run in order) to each
        of `input_columns` (default: the first column) on
        num_parallel_workers C++ threads. Python callables are not supported
        (the built-ins in spora.dataset.vision / .transforms run in C++)."""
        if unsupported:
            raise TypeError(f"[dataset map] unsupported arguments: {', '.join(sorted(unsupported))}")
        ops = operations if isinstance(operations, (list, tuple)) else [operations]
        handles = []
        for op in ops:
            if not isinstance(op, Transform):
                raise TypeError(f"[dataset map] {op!r} is not a spora.dataset transform; Python callables are not "
                                "supported in map (use spora.dataset.vision / spora.dataset.transforms, or "
                                "transform the batches in the training loop)")
            handles.append(op._handle())
        cols = _check_columns(self.get_col_names(), input_columns, "map")
        workers = config.get_num_parallel_workers() if num_parallel_workers is None else int(num_parallel_workers)
        return Dataset(self._h.map(handles, cols, workers, config.get_seed()), self)

    def shuffle(self, buffer_size):
        """Buffered shuffle: each row is drawn at random from a buffer of
        buffer_size rows (>= the dataset size gives a full permutation)."""
        return Dataset(self._h.shuffle(int(buffer_size), config.get_seed()), self)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None):
        """Stacks batch_size rows; the last smaller batch is kept unless drop_remainder."""
        return BatchDataset(self._h.batch(int(batch_size), bool(drop_remainder)), self)

    def repeat(self, count=None):
        """The dataset `count` times per epoch (each pass reshuffled)."""
        if count is None or count == -1:
            raise ValueError("[dataset repeat] an endless repeat is not supported; pass a count, or iterate "
                             "the dataset once per epoch (Model.train does)")
        return Dataset(self._h.repeat(int(count)), self)

    # -- sizes and names -------------------------------------------------------------------

    def get_dataset_size(self):
        """Rows (batches after batch()) per epoch."""
        return self._h.size()

    def __len__(self):
        return self.get_dataset_size()

    def get_col_names(self):
        return self._h.column_names()

    # -- iteration -------------------------------------------------------------------------

    def _next_epoch(self):
        e = self._epoch
        self._epoch += 1
        return e

    def _rows(self, epoch, device=""):
        """Tuples of Tensors of one epoch."""
        return self._h.iterate(device, epoch, config.get_prefetch_size())

    def __iter__(self):
        # A generator: nothing starts (and no epoch number is taken) until the
        # first row is asked for, so iter(ds) alone is free.
        one = len(self.get_col_names()) == 1
        for row in self._rows(self._next_epoch()):
            arrays = tuple(t.asnumpy() for t in row)
            yield arrays[0] if one else arrays

    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=True):
        """An iterator over rows as lists of Tensors (NumPy arrays with
        output_numpy=True). Re-iterating it starts the next epoch."""
        cols = _check_columns(self.get_col_names(), columns, "create_tuple_iterator")
        return _EpochIterator(self, cols, output_numpy, as_dict=False)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        """As create_tuple_iterator, rows as {column name: value}."""
        return _EpochIterator(self, [], output_numpy, as_dict=True)


class _EpochIterator:
    """Rows of successive epochs: next() continues the current epoch;
    iter() on an exhausted (or fresh) one starts the next."""

    def __init__(self, ds, cols, output_numpy, as_dict):
        self._ds, self._numpy, self._dict = ds, output_numpy, as_dict
        names = ds.get_col_names()
        self._names = names
        self._pick = [names.index(c) for c in cols] if cols else list(range(len(names)))
        self._it = None

    def __iter__(self):
        if self._it is None:
            self._it = self._ds._rows(self._ds._next_epoch())
        return self

    def __next__(self):
        if self._it is None:
            self._it = self._ds._rows(self._ds._next_epoch())
        try:
            row = next(self._it)
        except StopIteration:
            self._it = None
            raise
        vals = [row[i].asnumpy() if self._numpy else row[i] for i in self._pick]
        if self._dict:
            return {self._names[i]: v for i, v in zip(self._pick, vals)}
        return vals

    def __len__(self):
        return self._ds.get_dataset_size()


class BatchDataset(Dataset):
    """Kept for code written against the first spora.dataset: what .batch() returns."""
