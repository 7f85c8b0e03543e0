"""Running Python functions of a pipeline (map operations, a
GeneratorDataset's __getitem__) on worker threads or processes, in order.

ordered_map(fn, items, ...) yields fn(item) for each item in input order
while up to 4 x workers items are in flight. An exception raised by fn is
re-raised in the consumer when its item's turn comes (so it reaches the
training loop within the batch that holds the item), as the same exception
object: its traceback still shows the user's line (from a worker process,
the exception comes back pickled with the worker's formatted traceback as
__cause__). An item not done within config.get_python_op_timeout()
seconds raises TimeoutError naming the operation and the setting (worker
processes take chunks of 8 items, with 8 times the limit per chunk).

Threads are daemons: a hung function cannot be stopped, but it does not keep
the interpreter alive. Worker processes are forked (the functions, lambdas
included, need no pickling) and killed on timeout or when iteration stops.
"""
import collections
import itertools
import multiprocessing
import pickle
import queue
import threading
import traceback
from multiprocessing.pool import RemoteTraceback

from . import config


class _Slot:
    __slots__ = ("event", "value", "error")

    def __init__(self):
        self.event = threading.Event()
        self.value = None
        self.error = None


class _Threads:
    """One item per task: the GIL makes larger tasks no cheaper."""

    chunk = 1

    def __init__(self, fn, n):
        self._fn = fn
        self._closed = False
        self._q = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._loop, daemon=True, name=f"spora-dataset-{i}")
                         for i in range(n)]
        for t in self._threads:
            t.start()

    def _loop(self):
        while True:
            job = self._q.get()
            if job is None:
                return
            items, slot = job
            if self._closed:  # queued before the consumer stopped: nobody waits for it
                continue
            try:
                slot.value = self._fn(items[0])
            except BaseException as e:  # noqa: BLE001 - handed to the consumer as is
                slot.error = e
            slot.event.set()

    def submit(self, items):
        slot = _Slot()
        self._q.put((items, slot))
        return slot

    def wait(self, slot, timeout):
        return slot.event.wait(timeout)

    def result(self, slot):
        if slot.error is not None:
            return [], slot.error
        return [slot.value], None

    def close(self):
        self._closed = True
        for _ in self._threads:
            self._q.put(None)


# Functions handed to forked workers, by token: a forked child inherits this
# dict, so nothing is pickled but the items and results.
_FORKED = {}
_next_token = [0]


def _call_forked(token, items):
    """In a worker process: fn over a chunk of items; the results before a
    failure, the exception (picklable) and its formatted traceback."""
    fn, outs = _FORKED[token], []
    for item in items:
        try:
            outs.append(fn(item))
        except BaseException as e:  # noqa: BLE001 - sent back to the consumer
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            try:
                pickle.dumps(e)
            except Exception:  # noqa: BLE001 - an exception that cannot travel
                e = RuntimeError(f"{type(e).__name__}: {e}")
            return outs, e, text
    return outs, None, None


class _Processes:
    """Chunks of items per task: a task's round trip (pickling, the pool's
    queues) costs far more than a typical per-row function."""

    chunk = 8

    def __init__(self, fn, n):
        self._token = _next_token[0]
        _next_token[0] += 1
        _FORKED[self._token] = fn
        try:
            self._pool = multiprocessing.get_context("fork").Pool(n)
        finally:
            del _FORKED[self._token]

    def submit(self, items):
        return self._pool.apply_async(_call_forked, (self._token, items))

    def wait(self, res, timeout):
        res.wait(timeout)
        return res.ready()

    def result(self, res):
        outs, err, text = res.get(0)
        if err is not None:
            err.__cause__ = RemoteTraceback(text)  # the worker's traceback: the user's file and line
        return outs, err

    def close(self):
        self._pool.terminate()


def ordered_map(fn, items, workers, processes, what, describe, window=None):
    """fn(item) for each item of the iterable `items`, in order, at most
    `window` tasks (default 4 x workers) in flight. `what` names the
    operation in errors; describe(k) says which item k was ("row 12")."""
    window_size = window or 4 * workers
    pool = _Processes(fn, workers) if processes else _Threads(fn, workers)
    inflight = collections.deque()
    it = iter(items)
    done = False
    k = 0
    try:
        while True:
            while not done and len(inflight) < window_size:
                chunk = list(itertools.islice(it, pool.chunk))
                if len(chunk) < pool.chunk:
                    done = True
                if chunk:
                    inflight.append((len(chunk), pool.submit(chunk)))
            if not inflight:
                return
            n, head = inflight.popleft()
            timeout = config.get_python_op_timeout()
            if not pool.wait(head, timeout * n if timeout > 0 else None):
                rows = describe(k) if n == 1 else f"{describe(k)} (or one of the {n - 1} after it)"
                raise TimeoutError(f"[dataset] {what} did not finish {rows} within {timeout * n:g} s "
                                   f"({'worker process' if processes else 'worker thread'}); a hung or very slow "
                                   "function? The limit is spora.dataset.config.set_python_op_timeout(seconds) "
                                   "per row (0: wait forever)")
            outs, err = pool.result(head)
            for v in outs:
                yield v
                k += 1
            if err is not None:
                _note(err, f"[dataset] raised by {what} on {describe(k)}")
                raise err
    finally:
        pool.close()


def _note(e, text):
    if hasattr(e, "add_note"):  # Python 3.11+
        e.add_note(text)


def prefetched(make_rows, depth):
    """The rows of make_rows() (a generator), produced on a daemon thread up
    to `depth` ahead of the caller, so a Python pipeline's source and batch
    stacking run while the caller trains. An exception in the producer is
    raised here, after the rows before it. Stopping early (break, an error
    in the caller) stops the producer at its next row."""
    q = queue.Queue(depth)
    stop = threading.Event()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        rows = None
        try:
            rows = make_rows()
            for row in rows:
                if not put((0, row)):
                    return
            put((1, None))
        except BaseException as e:  # noqa: BLE001 - handed to the caller as is
            put((2, e))
        finally:
            if hasattr(rows, "close"):
                rows.close()

    threading.Thread(target=produce, daemon=True, name="spora-dataset-prefetch").start()
    try:
        while True:
            kind, value = q.get()
            if kind == 0:
                yield value
            elif kind == 1:
                return
            else:
                raise value
    finally:
        stop.set()
