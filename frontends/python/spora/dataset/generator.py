"""GeneratorDataset: rows from Python (mindspore.dataset.GeneratorDataset).

source is one of
- a random-access object (__getitem__ and __len__: a list, a NumPy array,
  a class): row i is source[i]; shuffle (the default), samplers and shards
  pick the indices; __getitem__ runs on num_parallel_workers threads, or
  worker processes with python_multiprocessing=True (the default, as in
  MindSpore, when num_parallel_workers > 1);
- an iterable (__iter__), iterated afresh each epoch;
- a callable returning an iterator (a generator function, a lambda),
  called each epoch.

A row is a tuple or list (one value per column) or a single value (one
column); values become NumPy arrays (Python ints int64, floats float64,
str strings, Tensors their values).
"""
import itertools
import types

import numpy as np

from . import config
from .engine import Dataset
from .samplers import as_sampler, epoch_rng, shard_order
from .workers import ordered_map

_END = object()


def _value(v):
    if hasattr(v, "asnumpy"):
        return v.asnumpy()
    return np.asarray(v)


class _GeneratorSource:
    """The Python node (pipeline.py) of a GeneratorDataset."""

    def __init__(self, source, names, types_, random_access, sampler, shuffle, seed, num_samples, shards, shard,
                 workers, processes):
        self.source, self.names, self.types = source, names, types_
        self.random_access, self.sampler, self.shuffle, self.seed = random_access, sampler, shuffle, seed
        self.num_samples, self.shards, self.shard = num_samples, shards, shard
        self.workers, self.processes = workers, processes
        self._size = None
        self._used_once = False

    # -- rows ------------------------------------------------------------------------------

    def _row(self, item):
        if isinstance(item, dict):
            raise TypeError(f"[GeneratorDataset] a row must be a value or a tuple of values (one per column), "
                            f"got a dict; return tuple(d[c] for c in {self.names})")
        vals = tuple(item) if isinstance(item, (tuple, list)) else (item,)
        if len(vals) != len(self.names):
            raise ValueError(f"[GeneratorDataset] the source gave {len(vals)} value(s) in a row but column_names "
                             f"has {len(self.names)} ({', '.join(self.names)})")
        out = tuple(_value(v) for v in vals)
        if self.types:
            out = tuple(a if t is None else a.astype(t) for a, t in zip(out, self.types))
        return out

    def _order(self, epoch):
        n = len(self.source)
        if self.sampler is not None:
            order = self.sampler.indices(n, epoch, self.seed)
        else:
            order = epoch_rng(self.seed, epoch, 0x4753).permutation(n) if self.shuffle else np.arange(n)
            order = shard_order(order, self.shards, self.shard)
        return order[:self.num_samples] if self.num_samples else order

    def _epoch_iterator(self):
        if callable(self.source) and not hasattr(self.source, "__iter__"):
            it = self.source()
            if not hasattr(it, "__next__"):
                it = iter(it)
            return it
        if isinstance(self.source, types.GeneratorType):
            if self._used_once:
                raise ValueError("[GeneratorDataset] a generator object can be iterated once, and this one was; "
                                 "pass the generator function instead (source=make_rows, or "
                                 "source=lambda: make_rows(...)) so each epoch gets a fresh one")
            self._used_once = True
        return iter(self.source)

    def describe(self, epoch, k):
        if not self.random_access or not hasattr(self.source, "describe"):
            return None
        order = self._order(epoch)
        return self.source.describe(int(order[k])) if k < len(order) else None

    def rows(self, epoch):
        if self.random_access:
            src, row = self.source, self._row
            return ordered_map(lambda i: row(src[int(i)]), iter(self._order(epoch)), self.workers,
                               self.processes, f"GeneratorDataset source {type(src).__name__}.__getitem__",
                               lambda k: f"sample {k} of epoch {epoch}")
        return self._iterate(epoch)

    def _iterate(self, epoch):
        it = self._epoch_iterator()
        # next() runs on a worker thread, so a hung generator meets the timeout;
        # one call at a time and none ahead, so none is left running on the
        # source when the epoch ends or the caller stops.
        pulled = ordered_map(lambda _: next(it, _END), itertools.count(), 1, False,
                             "GeneratorDataset source (next())", lambda k: f"row {k} of epoch {epoch}", window=1)
        taken = 0
        for k, item in enumerate(pulled):
            if item is _END:
                return
            if self.shards > 1 and k % self.shards != self.shard:
                continue
            yield self._row(item)
            taken += 1
            if self.num_samples and taken >= self.num_samples:
                return

    # -- size ------------------------------------------------------------------------------

    def cheap_size(self):
        return self.size() if self.random_access else self._size

    def size(self):
        if self._size is None:
            if self.random_access:
                self._size = len(self._order(0))
            else:
                if isinstance(self.source, types.GeneratorType):
                    raise ValueError("[GeneratorDataset] the size of a one-shot generator object is unknown "
                                     "until it is consumed; pass the generator function instead")
                n = sum(1 for _ in self._epoch_iterator())
                if self.shards > 1:
                    n = len(range(self.shard, n, self.shards))
                self._size = min(n, self.num_samples) if self.num_samples else n
        return self._size


class GeneratorDataset(Dataset):
    """Rows from a Python source (see the module's doc). column_names: a
    name or a list, one per value of a row. column_types: a NumPy/spora
    dtype per column (None keeps it). shuffle: random-access sources only
    (default True there). sampler: a spora.dataset sampler or an iterable
    of indices (random access only). num_shards/shard_id: this process's
    slice (random access: as the other sources; iterables: every
    num_shards-th row). num_samples: at most that many rows per epoch."""

    def __init__(self, source, column_names=None, column_types=None, schema=None, num_samples=None,
                 num_parallel_workers=1, shuffle=None, sampler=None, num_shards=None, shard_id=None,
                 python_multiprocessing=True, max_rowsize=None, seed=None):
        if schema is not None:
            raise TypeError("[GeneratorDataset] schema is not supported; pass column_names (and column_types)")
        if column_names is None:
            raise ValueError("[GeneratorDataset] column_names is required (a name, or one per value of a row)")
        names = [column_names] if isinstance(column_names, str) else list(column_names)
        if not names or len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"[GeneratorDataset] column_names must be distinct non-empty strings, got {column_names}")
        types_ = None
        if column_types is not None:
            from .._dtype import dtype_code, from_code, to_numpy_dtype
            column_types = list(column_types)
            if len(column_types) != len(names):
                raise ValueError(f"[GeneratorDataset] {len(column_types)} column_types for {len(names)} columns")
            types_ = [None if t is None else to_numpy_dtype(from_code(dtype_code(t))) for t in column_types]
        random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__") and \
            not isinstance(source, (str, bytes, dict))
        if not random_access and not hasattr(source, "__iter__") and not callable(source):
            raise TypeError(f"[GeneratorDataset] source must be random-access (__getitem__ and __len__), iterable "
                            f"or a callable returning an iterator, got {type(source).__name__}")
        if (num_shards is None) != (shard_id is None):
            raise ValueError(f"[GeneratorDataset] num_shards and shard_id go together (got num_shards={num_shards}, "
                             f"shard_id={shard_id})")
        shards = 1 if num_shards is None else int(num_shards)
        shard = 0 if shard_id is None else int(shard_id)
        if shards < 1 or not 0 <= shard < shards:
            raise ValueError(f"[GeneratorDataset] shard_id {shard} is not in [0, {shards}) (num_shards={shards})")
        sampler = as_sampler(sampler)
        if not random_access and (shuffle or sampler is not None):
            raise ValueError(f"[GeneratorDataset] shuffle and sampler need a random-access source (__getitem__ "
                             f"and __len__); {type(source).__name__} is only iterable: shuffle the dataset "
                             "afterwards with .shuffle(buffer_size)")
        if sampler is not None and (shuffle is not None or shards > 1):
            raise ValueError("[GeneratorDataset] pass either sampler or shuffle/num_shards/shard_id, not both "
                             "(DistributedSampler(num_shards, shard_id, shuffle) combines them)")
        workers = int(num_parallel_workers or 1)
        if not 1 <= workers <= 256:
            raise ValueError(f"[GeneratorDataset] num_parallel_workers must be in [1, 256], got {workers}")
        num_samples = int(num_samples) if num_samples else None
        node = _GeneratorSource(source, names, types_, random_access, sampler,
                                True if shuffle is None else bool(shuffle), config.get_seed() if seed is None
                                else int(seed), num_samples, shards, shard, workers,
                                bool(python_multiprocessing) and workers > 1 and random_access)
        super().__init__(None, None, node)
        self.source = source


__all__ = ["GeneratorDataset"]
