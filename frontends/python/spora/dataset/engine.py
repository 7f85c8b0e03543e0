"""Dataset: the MindSpore-style pipeline over the C++ data engine.

Every step (map, shuffle, batch, repeat) returns a new Dataset. A pipeline
of built-in sources and transforms wraps an immutable C++ description
(spora._C.Dataset); iterating starts a C++ iterator whose producer thread
and map() workers run outside the GIL, with a bounded prefetch queue. A
step that runs Python code (GeneratorDataset, a Python function in map) and
every step after it run in Python (pipeline.py), with the C++ part before
it still in C++.

Epochs. Each pass over a Dataset (each `for` loop, each epoch of a
create_*_iterator) is the next epoch number of that Dataset object, and
every random choice is keyed by (seed, epoch, sample): two runs with the
same seed and the same calls see the same data, for any worker count.

Iterating a Dataset (`for row in ds`, create_tuple_iterator(),
create_dict_iterator()) yields spora Tensors (lists of them; dicts), NumPy
arrays with output_numpy=True, as in MindSpore.

Device queue. On a device with its own memory, the rows handed out are
already there: when a loop takes row k, the host->device copies of the next
config.get_device_queue_size() rows are enqueued on the device's copy
stream (the C++ iterator does it for a C++ pipeline; _device_queued below
for a Python one, through spora._C.DeviceQueue).
"""
import collections

import numpy as np

from . import config
from . import pipeline as P
from .string_column import string_array
from .transforms import Transform
from .workers import prefetched

_TENSOR_NP = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_)}


def _names_arg(cols):
    if cols is None:
        return None
    return [cols] if isinstance(cols, str) else list(cols)


def _check_columns(names, cols, where):
    cols = _names_arg(cols)
    if cols is None:
        return []
    for c in cols:
        if c not in names:
            raise ValueError(f"[dataset {where}] no column {c!r} (columns: {', '.join(names)})")
    return cols


def _tensor_of(name, a):
    """A NumPy column value as a spora Tensor (strings: a StringArray, see
    string_column.py), or an error saying what to do."""
    from .._tensor import Tensor
    if a.dtype.kind in "US":
        return string_array(a)
    if a.dtype.kind == "O":
        raise TypeError(f"[dataset] column {name!r} holds Python objects ({a.dtype}), which spora Tensors cannot "
                        "hold: iterate with output_numpy=True (create_tuple_iterator(output_numpy=True)), or map "
                        "the column to numbers or strings first")
    if a.dtype not in _TENSOR_NP:
        raise TypeError(f"[dataset] column {name!r} is {a.dtype}, which spora Tensors do not hold (float32, "
                        "float64, float16, int32, int64, uint8, bool): map transforms.TypeCast(np.int32) (or "
                        "another) onto it, or iterate with output_numpy=True")
    return Tensor(a if a.flags.c_contiguous else a.copy())


_QUEUED = object()  # marks a column value that comes from the device queue


def _device_queued(rows, names, want, device, depth):
    """The Tensor rows of a Python pipeline's NumPy `rows`, the columns in
    `want` copied to `device` ahead of the caller: when row k is handed out,
    the copies of rows k+1..k+depth are already enqueued on the device's
    copy stream (spora_device_queue_push), so they run while the caller's
    step on row k runs; the device work the caller enqueues after taking a
    row waits for its copies (an event), the host does not. Rows are taken
    from `rows` on this thread, so no Python code runs anywhere else than
    without the queue. Columns the queue does not carry (strings, unread
    ones) are made as without it. An error met while looking ahead (raised
    by the user's function, or a column Tensors cannot hold) is raised once
    the rows before it are handed out, as the same exception object, so it
    reaches the loop at the row that failed with its traceback; interrupts
    (KeyboardInterrupt, SystemExit) are not held back."""
    from .. import _C
    q = _C.device_queue(device)
    if q is None:  # the device shares host memory: nothing to copy ahead
        for row in rows:
            yield tuple(_tensor_of(n, a) if i in want else a for i, (n, a) in enumerate(zip(names, row)))
        return
    held = collections.deque()  # per row on the queue: its values, _QUEUED where the queue has them
    error = None
    ended = False

    def fill(ahead):
        nonlocal error, ended
        while not ended and error is None and len(held) < ahead:
            try:
                row = next(rows)
                values, columns = [], []
                for i, (n, a) in enumerate(zip(names, row)):
                    if i in want and isinstance(a, np.ndarray) and a.dtype in _TENSOR_NP:
                        columns.append(a if a.flags.c_contiguous else a.copy())
                        values.append(_QUEUED)
                    else:
                        values.append(_tensor_of(n, a) if i in want else a)
                q.push(columns)
            except StopIteration:
                ended = True
                return
            except Exception as e:  # noqa: BLE001 - raised at its row, below
                error = e
                return
            held.append(values)

    try:
        while True:
            fill(1)
            if not held:
                if error is not None:
                    raise error
                return
            values = held.popleft()
            tensors = iter(q.pop())
            out = tuple(next(tensors) if v is _QUEUED else v for v in values)
            # The next rows' copies, overlapping the step the caller runs on this one.
            fill(depth)
            yield out
    finally:
        if hasattr(rows, "close"):
            rows.close()


class Dataset:
    """Base of every dataset: a C++ description (`_h`) or, once Python code
    is involved, a Python node (`_node`, see pipeline.py)."""

    def __init__(self, handle, parent=None, node=None):
        self._h = handle
        self._node = node
        self._parent = parent
        self._epoch = 0

    def _as_node(self):
        return self._node if self._node is not None else P.CxxNode(self._h)

    @staticmethod
    def _python(node, parent):
        return Dataset(None, parent, node)

    # -- pipeline steps --------------------------------------------------------------------

    def map(self, operations, input_columns=None, output_columns=None, num_parallel_workers=None,
            python_multiprocessing=False, **unsupported):
        """Applies `operations` (a transform, a Python callable, a Compose or a
        list, run in order) to `input_columns` (default: the first column).

        Built-in transforms only (and no renaming): the C++ workers run them,
        each listed column separately. Python callables run on
        num_parallel_workers threads, or worker processes with
        python_multiprocessing=True; the first gets the input columns as
        arguments and its outputs (a value or a tuple) feed the next; the
        last outputs become output_columns (default: input_columns)."""
        for k in ("column_order", "max_rowsize", "callbacks", "offload", "cache"):
            if unsupported.get(k) is None:
                unsupported.pop(k, None)
        if unsupported:
            raise TypeError(f"[dataset map] unsupported arguments: {', '.join(sorted(unsupported))} "
                            "(column_order: use .project(columns) after map)")
        ops = P.flatten_ops(operations)
        names = self.get_col_names()
        in_cols = _check_columns(names, input_columns, "map") or [names[0]]
        out_cols = _names_arg(output_columns) or list(in_cols)
        workers = config.get_num_parallel_workers() if num_parallel_workers is None else int(num_parallel_workers)
        if not 1 <= workers <= 256:
            raise ValueError(f"[dataset map] num_parallel_workers must be in [1, 256], got {workers}")
        builtin = all(isinstance(op, Transform) for op in ops)
        if self._node is None and builtin and out_cols == in_cols:
            handles = [op._handle() for op in ops]
            return Dataset(self._h.map(handles, in_cols, workers, config.get_seed()), self)
        if builtin and len(out_cols) != len(in_cols):
            raise ValueError(f"[dataset map] built-in transforms keep the column count: {len(in_cols)} input "
                             f"column(s), {len(out_cols)} output_columns")
        node = P.MapNode(self._as_node(), ops, in_cols, out_cols, workers, bool(python_multiprocessing),
                         config.get_seed(), self._depth())
        return self._python(node, self)

    def _depth(self):
        n, d = 0, self
        while d is not None:
            n += 1
            d = d._parent
        return n

    def shuffle(self, buffer_size):
        """Buffered shuffle: each row is drawn at random from a buffer of
        buffer_size rows (>= the dataset size gives a full permutation)."""
        if self._node is not None:
            return self._python(P.ShuffleNode(self._node, int(buffer_size), config.get_seed()), self)
        return Dataset(self._h.shuffle(int(buffer_size), config.get_seed()), self)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None, **unsupported):
        """Stacks batch_size rows; the last smaller batch is kept unless drop_remainder."""
        if unsupported.get("per_batch_map") is not None or unsupported.get("input_columns") is not None:
            raise TypeError("[dataset batch] per_batch_map/input_columns are not supported: map a Python "
                            "function over the rows before batch() (or transform the batches in the loop)")
        unsupported = {k: v for k, v in unsupported.items()
                       if v is not None and k not in ("python_multiprocessing", "max_rowsize", "output_columns",
                                                      "per_batch_map", "input_columns")}
        if unsupported:
            raise TypeError(f"[dataset batch] unsupported arguments: {', '.join(sorted(unsupported))}")
        if self._node is not None:
            out = BatchDataset(None, self, P.BatchNode(self._node, int(batch_size), bool(drop_remainder)))
        else:
            out = BatchDataset(self._h.batch(int(batch_size), bool(drop_remainder)), self)
        out._batch_size = int(batch_size)
        return out

    def repeat(self, count=None):
        """The dataset `count` times per epoch (each pass reshuffled)."""
        if count is None or count == -1:
            raise ValueError("[dataset repeat] an endless repeat is not supported; pass a count, or iterate "
                             "the dataset once per epoch (Model.train does)")
        if self._node is not None:
            if int(count) < 1:
                raise ValueError(f"[dataset repeat] count must be >= 1, got {count}")
            return self._python(P.RepeatNode(self._node, int(count)), self)
        return Dataset(self._h.repeat(int(count)), self)

    def take(self, count=-1):
        """The first `count` rows of each epoch (-1: all)."""
        count = int(count)
        if count == -1:
            return self
        if count < 0:
            raise ValueError(f"[dataset take] count must be >= 0 or -1, got {count}")
        return self._python(P.TakeNode(self._as_node(), 0, count), self)

    def skip(self, count):
        """Each epoch without its first `count` rows."""
        count = int(count)
        if count < 0:
            raise ValueError(f"[dataset skip] count must be >= 0, got {count}")
        return self._python(P.TakeNode(self._as_node(), count, None), self)

    def project(self, columns):
        """Only `columns`, in that order."""
        cols = _check_columns(self.get_col_names(), columns, "project")
        names = self.get_col_names()
        return self._python(P.ProjectNode(self._as_node(), [names.index(c) for c in cols], cols), self)

    def rename(self, input_columns, output_columns):
        """Columns `input_columns` renamed to `output_columns`."""
        ins = _check_columns(self.get_col_names(), input_columns, "rename")
        outs = _names_arg(output_columns)
        if len(ins) != len(outs):
            raise ValueError(f"[dataset rename] {len(ins)} input_columns but {len(outs)} output_columns")
        names = [outs[ins.index(n)] if n in ins else n for n in self.get_col_names()]
        if len(set(names)) != len(names):
            raise ValueError(f"[dataset rename] the new names repeat a column: {names}")
        return self._python(P.ProjectNode(self._as_node(), list(range(len(names))), names), self)

    # -- sizes and names -------------------------------------------------------------------

    def get_dataset_size(self):
        """Rows (batches after batch()) per epoch."""
        return self._node.size() if self._node is not None else self._h.size()

    def __len__(self):
        """get_dataset_size(), where known without a pass over a Python
        iterable source (else TypeError, as len() of an iterator)."""
        if self._node is not None:
            n = self._node.cheap_size()
            if n is None:
                raise TypeError("[dataset] the size of a dataset over a Python iterable is only known after a "
                                "pass; call get_dataset_size() (it iterates the source once)")
            return n
        return self.get_dataset_size()

    def get_col_names(self):
        return list(self._node.names) if self._node is not None else self._h.column_names()

    def _first_row(self):
        """The next epoch's first row as NumPy (runs the pipeline that far;
        the epoch counter does not move)."""
        rows = self._rows(self._epoch, numpy=True)
        try:
            for row in rows:
                return row
        finally:
            if hasattr(rows, "close"):
                rows.close()
        raise ValueError("[dataset] the dataset is empty: no row to take shapes or types from")

    def output_shapes(self, estimate=False):
        """[shape of each column] of the first row (batch dimension included)."""
        return [list(a.shape) for a in self._first_row()]

    def output_types(self):
        """[NumPy dtype of each column] of the first row."""
        return [a.dtype for a in self._first_row()]

    def get_batch_size(self):
        """The batch size of the nearest batch() step (1 if none)."""
        d = self
        while d is not None:
            if isinstance(d, BatchDataset) and getattr(d, "_batch_size", None):
                return d._batch_size
            d = d._parent
        return 1

    # -- iteration -------------------------------------------------------------------------

    def _next_epoch(self):
        e = self._epoch
        self._epoch += 1
        return e

    def _rows(self, epoch, device="", numpy=False, pick=None):
        """Tuples of one epoch's column values: Tensors, or NumPy with
        numpy=True. pick: the column indices the caller reads (the others
        of a Python pipeline stay NumPy, so an unread column Tensors cannot
        hold, int16 or objects, is no error)."""
        if self._node is None:
            it = self._h.iterate(device, epoch, config.get_prefetch_size(), config.get_device_queue_size())
            return (tuple(t.asnumpy() for t in row) for row in it) if numpy else it
        node = self._node
        rows = prefetched(lambda: node.rows(epoch), config.get_prefetch_size())
        if numpy:
            return rows
        names = self._node.names
        want = set(range(len(names)) if pick is None else pick)
        depth = config.get_device_queue_size()
        if depth:
            return _device_queued(rows, names, want, device, depth)
        return (tuple(_tensor_of(n, a) if i in want else a for i, (n, a) in enumerate(zip(names, row)))
                for row in rows)

    def __iter__(self):
        """One epoch of rows, each a list of Tensors (one per column), as
        MindSpore's `for data in dataset` gives them."""
        # A generator: nothing starts (and no epoch number is taken) until the
        # first row is asked for, so iter(ds) alone is free.
        for row in self._rows(self._next_epoch()):
            yield list(row)

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
            self._it = self._ds._rows(self._ds._next_epoch(), numpy=self._numpy, pick=self._pick)
        return self

    def __next__(self):
        if self._it is None:
            self._it = self._ds._rows(self._ds._next_epoch(), numpy=self._numpy, pick=self._pick)
        try:
            row = next(self._it)
        except StopIteration:
            self._it = None
            raise
        vals = [row[i] for i in self._pick]
        if self._dict:
            return {self._names[i]: v for i, v in zip(self._pick, vals)}
        return vals

    def __len__(self):
        return self._ds.get_dataset_size()


class BatchDataset(Dataset):
    """Kept for code written against the first spora.dataset: what .batch() returns."""
