"""The Python half of the pipeline: the steps of a dataset that runs Python
code (a GeneratorDataset source, a Python function in map) or follows such a
step.

A node has `names` (its columns), `size()` (rows per epoch, exact; may
run a source once to count), `cheap_size()` (the same, or None where only
counting would tell), `describe(epoch, k)` (where row k comes from, e.g.
its file, or None) and
`rows(epoch)`, a generator of rows, each a tuple of NumPy arrays. A C++
pipeline feeding a Python step is one CxxNode: everything up to there still
runs in C++. Randomness is keyed by (seed, epoch, position) as in the C++
engine, so an epoch's rows do not depend on the worker count.
"""
import numpy as np

from .transforms import Compose, Transform
from .workers import ordered_map, _note


def _to_array(v):
    if hasattr(v, "asnumpy"):
        return v.asnumpy()
    return np.asarray(v)


class CxxNode:
    """Rows of a C++ pipeline (spora._C.Dataset), as NumPy."""

    def __init__(self, handle):
        self.handle = handle
        self.names = handle.column_names()

    def size(self):
        return self.handle.size()

    def cheap_size(self):
        return self.handle.size()

    def describe(self, epoch, k):
        return None

    def rows(self, epoch):
        from . import config
        for row in self.handle.iterate("cpu", epoch, config.get_prefetch_size()):
            yield tuple(t.asnumpy() for t in row)


def flatten_ops(operations):
    """A map's operations as a flat list (Compose unpacked), so each
    built-in gets the row's own random stream."""
    ops = operations if isinstance(operations, (list, tuple)) else [operations]
    flat = []
    for op in ops:
        if isinstance(op, Compose):
            flat.extend(flatten_ops(op.transforms))
        elif isinstance(op, Transform) or callable(op):
            flat.append(op)
        else:
            raise TypeError(f"[dataset map] {op!r} is neither a spora.dataset transform nor a callable")
    if not flat:
        raise ValueError("[dataset map] no operations given")
    return flat


def _op_name(op):
    if isinstance(op, Transform):
        return type(op).__name__
    return getattr(op, "__qualname__", None) or getattr(op, "__name__", None) or type(op).__name__


class MapNode:
    """map(): operations run in order on the input columns; the first gets
    them as positional arguments, each next one the previous one's outputs
    (a built-in transform applies to each value separately). The last
    outputs replace the input columns, named output_columns, at the place of
    the first input column."""

    def __init__(self, child, ops, in_cols, out_cols, workers, processes, seed, map_id):
        self.child, self.ops = child, ops
        self.in_idx = [child.names.index(c) for c in in_cols]
        self.in_cols, self.out_cols = in_cols, out_cols
        self.workers, self.processes = workers, processes
        self.seed, self.map_id = seed, map_id
        first = min(self.in_idx)
        kept = [n for i, n in enumerate(child.names) if i not in self.in_idx]
        at = sum(1 for i in range(first) if i not in self.in_idx)
        self.names = kept[:at] + list(out_cols) + kept[at:]
        self._at = at
        for n in out_cols:
            if n in kept:
                raise ValueError(f"[dataset map] output column {n!r} already exists (columns: {', '.join(child.names)})")
        if len(set(out_cols)) != len(out_cols):
            raise ValueError(f"[dataset map] output_columns repeat a name: {out_cols}")
        self.what = "map(" + ", ".join(_op_name(o) for o in ops) + f") on {', '.join(in_cols)}"

    def size(self):
        return self.child.size()

    def cheap_size(self):
        return self.child.cheap_size()

    def _row_fn(self, epoch):
        ops, in_idx, seed, map_id = self.ops, self.in_idx, self.seed, self.map_id
        nout, at = len(self.out_cols), self._at

        def run(job):
            index, row = job
            vals = tuple(row[i] for i in in_idx)
            for k, op in enumerate(ops):
                if isinstance(op, Transform):
                    rng = np.random.default_rng([seed, epoch, map_id, k, index]) if op._random else None
                    vals = tuple(op._apply(v, rng) for v in vals)
                    continue
                try:
                    out = op(*vals)
                except BaseException as e:
                    _note(e, f"[dataset] in the Python function {_op_name(op)} (operation {k} of the map)")
                    raise
                vals = tuple(_to_array(v) for v in (out if isinstance(out, tuple) else (out,)))
            if len(vals) != nout:
                raise ValueError(f"[dataset map] the operations return {len(vals)} value(s) but output_columns "
                                 f"names {nout} ({', '.join(self.out_cols)})")
            kept = [v for i, v in enumerate(row) if i not in in_idx]
            return tuple(kept[:at]) + vals + tuple(kept[at:])
        return run

    def rows(self, epoch):
        jobs = enumerate(self.child.rows(epoch))

        def where(k):
            origin = self.child.describe(epoch, k)
            return f"row {k} of epoch {epoch}" + (f" ({origin})" if origin else "")
        return ordered_map(self._row_fn(epoch), jobs, self.workers, self.processes, self.what, where)

    def describe(self, epoch, k):
        return self.child.describe(epoch, k)


class BatchNode:
    def __init__(self, child, batch_size, drop_remainder):
        if batch_size < 1:
            raise ValueError(f"[dataset batch] batch_size must be >= 1, got {batch_size}")
        self.child, self.batch_size, self.drop = child, batch_size, drop_remainder
        self.names = child.names

    def size(self):
        return self._of(self.child.size())

    def cheap_size(self):
        return self._of(self.child.cheap_size())

    def _of(self, n):
        if n is None:
            return None
        return n // self.batch_size if self.drop else -(-n // self.batch_size)

    def _stack(self, rows, b):
        out = []
        for c, name in enumerate(self.names):
            first = rows[0][c]
            for r, row in enumerate(rows):
                v = row[c]
                if v.shape != first.shape or v.dtype != first.dtype:
                    raise ValueError(f"[dataset batch] batch {b}: column '{name}' of row {r} is {v.dtype} "
                                     f"{v.shape} but row 0 is {first.dtype} {first.shape}")
            out.append(np.stack([row[c] for row in rows]))
        return tuple(out)

    def describe(self, epoch, k):
        return None  # rows are regrouped or reordered: no single origin

    def rows(self, epoch):
        buf, b = [], 0
        for row in self.child.rows(epoch):
            buf.append(row)
            if len(buf) == self.batch_size:
                yield self._stack(buf, b)
                buf, b = [], b + 1
        if buf and not self.drop:
            yield self._stack(buf, b)


class ShuffleNode:
    """MindSpore's buffered shuffle, drawn from (seed, epoch)."""

    def __init__(self, child, buffer_size, seed):
        if buffer_size < 2:
            raise ValueError(f"[dataset shuffle] buffer_size must be >= 2, got {buffer_size}")
        self.child, self.cap, self.seed = child, buffer_size, seed
        self.names = child.names

    def size(self):
        return self.child.size()

    def cheap_size(self):
        return self.child.cheap_size()

    def describe(self, epoch, k):
        return None  # rows are regrouped or reordered: no single origin

    def rows(self, epoch):
        rng = np.random.default_rng([self.seed, epoch, 0x5348])
        buf = []
        for row in self.child.rows(epoch):
            if len(buf) < self.cap:
                buf.append(row)
                continue
            k = int(rng.integers(len(buf)))
            out, buf[k] = buf[k], row
            yield out
        while buf:
            k = int(rng.integers(len(buf)))
            buf[k], buf[-1] = buf[-1], buf[k]
            yield buf.pop()


class RepeatNode:
    """Pass r of epoch e is the child's epoch e * count + r (as in C++)."""

    def __init__(self, child, count):
        self.child, self.count = child, count
        self.names = child.names

    def size(self):
        return self.child.size() * self.count

    def cheap_size(self):
        n = self.child.cheap_size()
        return None if n is None else n * self.count

    def describe(self, epoch, k):
        return None  # rows are regrouped or reordered: no single origin

    def rows(self, epoch):
        for r in range(self.count):
            yield from self.child.rows(epoch * self.count + r)


class ProjectNode:
    """project(columns) / rename(): picks and names columns."""

    def __init__(self, child, pick, names):
        self.child, self.pick, self.names = child, pick, names

    def size(self):
        return self.child.size()

    def cheap_size(self):
        return self.child.cheap_size()

    def describe(self, epoch, k):
        return self.child.describe(epoch, k)

    def rows(self, epoch):
        for row in self.child.rows(epoch):
            yield tuple(row[i] for i in self.pick)


class TakeNode:
    """take(count) / skip(count): rows [start, start + count) of each epoch."""

    def __init__(self, child, start, count):
        self.child, self.start, self.count = child, start, count
        self.names = child.names

    def _of(self, n):
        if n is None:
            return None
        n = max(n - self.start, 0)
        return n if self.count is None else min(n, self.count)

    def size(self):
        return self._of(self.child.size())

    def cheap_size(self):
        return self._of(self.child.cheap_size())

    def describe(self, epoch, k):
        return self.child.describe(epoch, k + self.start)

    def rows(self, epoch):
        end = None if self.count is None else self.start + self.count
        for k, row in enumerate(self.child.rows(epoch)):
            if end is not None and k >= end:
                return
            if k >= self.start:
                yield row
