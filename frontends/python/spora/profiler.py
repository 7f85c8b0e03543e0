"""spora.Profiler: host ops, device work, steps, memory and collectives on one timeline.

    with spora.Profiler("./prof") as p:      # or Profiler(output_path=...), .start() / .stop() / .analyse()
        model.train(1, dataset)
    # ./prof/trace.json opens in https://ui.perfetto.dev (or chrome://tracing);
    # the op summary table is printed and saved beside it (op_summary.txt).

A session records every eager op (name, input/output dtypes and shapes, the
line of your code that called it), every step of a compiled (jit) graph,
the device work plugins report (one track per stream, an arrow from the op
that launched it), `Model.train` steps, collectives (bytes, communicator)
and device memory (allocated / reserved). It is process-wide: one session at
a time. When none runs, an op pays one relaxed atomic load. See
docs/profiler.md.
"""
import os

from . import _C

__all__ = ["Profiler"]

# The running Profiler, if any: Model.train marks its steps only then.
_active = None


def _range_begin(category, name):
    """Begins a range on this thread's track while a session runs; the id for _range_end (0 when none runs)."""
    return _C._profiler_range_begin(category, name) if _active is not None else 0


def _range_end(range_id):
    if range_id:
        _C._profiler_range_end(range_id)


def _rank():
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SPORA_RANK"):
        value = os.environ.get(key)
        if value is not None and value.isdigit():
            return int(value)
    return None


class Profiler:
    """Records a profile of this process (MindSpore's `mindspore.Profiler`).

    Args:
        output_path: a directory (created if missing) that gets `trace.json`
            (`trace_rank<r>.json` under a launcher that sets the rank) and
            `op_summary.txt`; or a path ending in ".json" for the trace, the
            summary going beside it as `<name>.summary.txt`.
        start_profile: start recording now (MindSpore's default); else call
            `start()` (or enter a `with` block).
        print_summary: `analyse()` prints the op summary table.

    Only one session runs at a time in a process; starting a second raises
    SporaValueError.
    """

    def __init__(self, output_path="./data", *, start_profile=True, print_summary=True):
        if not isinstance(output_path, (str, os.PathLike)):
            raise TypeError(f"[Profiler] output_path must be a path, got {type(output_path).__name__}")
        self.output_path = os.fspath(output_path)
        self.print_summary = bool(print_summary)
        self._running = False
        self._analysed = False
        if start_profile:
            self.start()

    # -- recording ---------------------------------------------------------------

    def start(self):
        """Starts recording (drops what an earlier session of this process recorded)."""
        global _active
        if self._running:
            return
        _C._profiler_start()
        self._running = True
        self._analysed = False
        _active = self

    def stop(self):
        """Stops recording; the profile stays readable (summary, analyse)."""
        global _active
        if not self._running:
            return
        self._running = False
        if _active is self:
            _active = None
        _C._profiler_stop()

    # -- results -----------------------------------------------------------------

    @property
    def trace_path(self):
        """Where analyse() writes the Chrome trace-event JSON."""
        if self.output_path.endswith(".json"):
            return self.output_path
        rank = _rank()
        return os.path.join(self.output_path, "trace.json" if rank is None else f"trace_rank{rank}.json")

    @property
    def summary_path(self):
        """Where analyse() writes the op summary table."""
        if self.output_path.endswith(".json"):
            return self.output_path[:-len(".json")] + ".summary.txt"
        rank = _rank()
        return os.path.join(self.output_path, "op_summary.txt" if rank is None else f"op_summary_rank{rank}.txt")

    def summary(self):
        """The op summary table: per op, calls, self and total host time, % of all ops' self time;
        then the device work per kernel."""
        return _C._profiler_summary()

    def analyse(self):
        """Stops recording if needed, writes the trace and the summary, prints the summary
        (print_summary) and returns the trace's path."""
        self.stop()
        trace = self.trace_path
        folder = os.path.dirname(trace)
        if folder:
            os.makedirs(folder, exist_ok=True)
        _C._profiler_write_trace(trace)
        text = self.summary()
        with open(self.summary_path, "w") as f:
            f.write(text)
        if self.print_summary:
            print(text, end="")
        self._analysed = True
        return trace

    # -- with ----------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.stop()  # the profile of a failed run is still written, quietly
            try:
                printing, self.print_summary = self.print_summary, False
                self.analyse()
            finally:
                self.print_summary = printing
            return False
        self.analyse()
        return False
