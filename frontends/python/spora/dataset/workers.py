"""Running Python functions of a pipeline (map operations, a
GeneratorDataset's __getitem__) on worker threads or processes, in order.

ordered_map(fn, items, ...) yields fn(item) for each item in input order
while up to 4 x workers items are in flight. An exception raised by fn is
re-raised in the consumer when its item's turn comes (so it reaches the
training loop within the batch that holds the item), as the same exception
object: its traceback still shows the user's line (from a worker process,
Python's multiprocessing attaches the remote traceback as __cause__). An
item not done within config.get_python_op_timeout() seconds raises
TimeoutError naming the operation and the setting.

Threads are daemons: a hung function cannot be stopped, but it does not keep
the interpreter alive. Worker processes are forked (the functions, lambdas
included, need no pickling) and killed on timeout or when iteration stops.
"""
import collections
import multiprocessing
import queue
import threading

from . import config


class _Slot:
    __slots__ = ("event", "value", "error")

    def __init__(self):
        self.event = threading.Event()
        self.value = None
        self.error = None


class _Threads:
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
            item, slot = job
            if self._closed:  # queued before the consumer stopped: nobody waits for it
                continue
            try:
                slot.value = self._fn(item)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer as is
                slot.error = e
            slot.event.set()

    def submit(self, item):
        slot = _Slot()
        self._q.put((item, slot))
        return slot

    def wait(self, slot, timeout):
        if not slot.event.wait(timeout):
            return False
        if slot.error is not None:
            err, slot.error = slot.error, None
            raise err
        return True

    def close(self):
        self._closed = True
        for _ in self._threads:
            self._q.put(None)


# Functions handed to forked workers, by token: a forked child inherits this
# dict, so nothing is pickled but the items and results.
_FORKED = {}
_next_token = [0]


def _call_forked(token, item):
    return _FORKED[token](item)


class _Processes:
    def __init__(self, fn, n):
        self._token = _next_token[0]
        _next_token[0] += 1
        _FORKED[self._token] = fn
        try:
            self._pool = multiprocessing.get_context("fork").Pool(n)
        finally:
            del _FORKED[self._token]

    def submit(self, item):
        return self._pool.apply_async(_call_forked, (self._token, item))

    def wait(self, res, timeout):
        try:
            res.wait(timeout)
            if not res.ready():
                return False
            res.get(0)  # raises the worker's exception (traceback as __cause__)
        except multiprocessing.TimeoutError:
            return False
        return True

    def value(self, res):
        return res.get(0)

    def close(self):
        self._pool.terminate()


def ordered_map(fn, items, workers, processes, what, describe, window=None):
    """fn(item) for each item of the iterable `items`, in order, at most
    `window` (default 4 x workers) in flight. `what` names the operation in
    errors; describe(k) says which item k was ("row 12")."""
    window_size = window or 4 * workers
    pool = _Processes(fn, workers) if processes else _Threads(fn, workers)
    inflight = collections.deque()
    it = iter(items)
    done = False
    k = 0
    try:
        while True:
            while not done and len(inflight) < window_size:
                try:
                    item = next(it)
                except StopIteration:
                    done = True
                    break
                inflight.append(pool.submit(item))
            if not inflight:
                return
            head = inflight.popleft()
            timeout = config.get_python_op_timeout()
            try:
                ok = pool.wait(head, timeout if timeout > 0 else None)
            except BaseException as e:
                _note(e, f"[dataset] raised by {what} on {describe(k)}")
                raise
            if not ok:
                raise TimeoutError(f"[dataset] {what} did not finish {describe(k)} within {timeout:g} s "
                                   f"({'worker process' if processes else 'worker thread'}); a hung or very slow "
                                   "function? The limit is spora.dataset.config.set_python_op_timeout(seconds) "
                                   "(0: wait forever)")
            yield pool.value(head) if processes else head.value
            k += 1
    finally:
        pool.close()


def _note(e, text):
    if hasattr(e, "add_note"):  # Python 3.11+
        e.add_note(text)
