"""spora.jit: trace a Python function into a graph, compile it, cache the
executable by input signature.

Tracing runs the function once with symbolic tensors: every op is recorded
(with the caller's file:line) instead of computed. Parameters it reads become
graph weights bound to their current values on every call;
Parameter.assign_value / set_data become extra outputs written back after
each run (into the Parameter's own memory where the compiled plan no longer
reads the old value and no other tensor shares it, as an in-place update).
Python control flow that needs a tensor's value cannot be traced: the
function then runs eagerly from then on, after one warning naming the line.
"""
import functools
import warnings

import numpy as np

from . import _C
from . import _context
from . import _parallel
from . import _spmd
from . import _tree
from ._tensor import Tensor
from ._trace import TraceState


class JitFallbackWarning(UserWarning):
    """A jit function fell back to eager execution."""


_EAGER = object()

# Passes the function being traced asks for by name, run after its opt level
# (spora.amp: cells left to the core's mixed_precision pass ask for it while
# they are traced; no opt level changes numerics). Reset at each trace.
_requested_passes = []


def request_pass(name):
    """Called during a trace: run the pass `name` on the traced graph."""
    if name not in _requested_passes:
        _requested_passes.append(name)


class _Entry:
    __slots__ = ("exe", "weights", "weight_sigs", "out_def", "out_static", "n_out", "assigned", "graph_text",
                 "single", "donate")

    def weights_current(self):
        """The Parameters bound as weights still have the dtype and shape the
        graph was compiled for (set_data may change them)."""
        for w, s in zip(self.weights, self.weight_sigs):
            if w._sig() != s:
                return False
        return True

    def run(self, tensors):
        params = tensors + self.weights if self.weights else tensors
        outs = self.exe.run(params, self.donate) if self.donate else self.exe.run(params)
        if self.single:  # one tensor out, nothing written back: the common case
            return outs[0]
        n = self.n_out
        for p, o in zip(self.assigned, outs[n:]):
            p._set_value(o)
        it = iter(outs[:n])
        leaves = [next(it) if s is _TENSOR else s for s in self.out_static]
        return _tree.unflatten(_tree.LEAF if self.out_def is None else self.out_def, leaves)


_TENSOR = object()


def _static_key(x):
    try:
        hash(x)
        return (type(x), x)
    except TypeError:
        if isinstance(x, np.ndarray):
            return ("ndarray", x.dtype.str, x.shape, x.tobytes())
        return ("id", id(x))


class JitFunction:
    """A function compiled on first call per input signature (dtype, shape
    and device of tensor arguments; other arguments by value).

    ``stats`` counts traces (compilations), cache hits and eager calls."""

    def __init__(self, fn, level=None, device=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.level = level
        self.device = device
        self.stats = {"traces": 0, "hits": 0, "eager_calls": 0}
        self._cache = {}
        self._fast = {}  # positional plain-Tensor calls: key is the tuple of signatures
        self._eager = None  # "file:line" once the function fell back

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self._call_bound, obj)

    def _call_bound(self, obj, *args, **kwargs):
        return self._call((obj,) + args, kwargs)

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs)

    def cache_clear(self):
        self._cache.clear()
        self._fast.clear()

    def _call(self, args, kwargs):
        if _C.current_trace() is not None:  # inside another trace: inline
            return self.fn(*args, **kwargs)
        if self._eager is not None:
            self.stats["eager_calls"] += 1
            return self.fn(*args, **kwargs)
        # Fast path: positional arguments that are all plain Tensors.
        fast_key = None
        if not kwargs:
            fast_key = tuple(a._sig() for a in args if type(a) is Tensor)
            if len(fast_key) != len(args):
                fast_key = None
            else:
                entry = self._fast.get(fast_key)
                if entry is not None and entry.weights_current():
                    self.stats["hits"] += 1
                    return entry.run(list(args))
        leaves, treedef = _tree.flatten((args, kwargs))
        parts = []
        tensors = []
        for x in leaves:
            if isinstance(x, Tensor):
                if x._is_param:
                    parts.append(("param", id(x)))
                else:
                    parts.append(x._sig())
                    tensors.append(x)
            else:
                parts.append(_static_key(x))
        key = (treedef, tuple(parts))
        entry = self._cache.get(key)
        if entry is not None and entry.weights_current():
            self.stats["hits"] += 1
            return entry.run(tensors)
        entry = self._trace(args, kwargs, leaves, treedef)
        if entry is _EAGER:
            self.stats["eager_calls"] += 1
            return self.fn(*args, **kwargs)
        self._cache[key] = entry
        if fast_key is not None:
            self._fast[fast_key] = entry
        return entry.run(tensors)

    def _device(self, leaves):
        if self.device is not None:
            return self.device
        for x in leaves:
            if isinstance(x, Tensor):
                return x.device
        return _C.get_device()

    def _trace(self, args, kwargs, leaves, treedef):
        self.stats["traces"] += 1
        device = self._device(leaves)
        graph, state, trace = _open(self.fn, device)
        try:
            rec = _record(self.fn, state, trace, leaves, treedef)
            if rec is None:
                return self._fall_back(trace)
            values, static, out_def, assigned = rec
            if _parallel.semi_auto():  # this rank's part of the step, before optimising it
                self.last_plan = _spmd.partition(graph, state, len(values) - len(assigned), assigned)
            level = self.level if self.level is not None else _context.get_context("jit_level")
            graph.optimize(level)
            for name in _requested_passes:
                graph.run_pass(name)
            entry = _Entry()
            entry.graph_text = None
            entry.exe = graph.compile(device)
            entry.weights = list(state.weights)
        finally:
            trace.close()  # also on errors: the trace holds tensors and Python state
        entry.weight_sigs = [w._sig() for w in entry.weights]
        entry.out_def = None if out_def is _tree.LEAF else out_def
        entry.single = entry.out_def is None and static == [_TENSOR] and not assigned
        entry.out_static = static
        entry.n_out = len(values) - len(assigned)
        entry.assigned = assigned
        # An assigned Parameter's new value may overwrite its old one in
        # place (where the plan proves the old one is no longer read), so a
        # training step holds one copy of the weights and optimizer state.
        n_in = sum(1 for x in leaves if isinstance(x, Tensor) and not x._is_param)
        slot = {id(w): n_in + i for i, w in enumerate(entry.weights)}
        entry.donate = [-1] * entry.n_out + [slot.get(id(p), -1) for p in assigned] if assigned else []
        self.last_graph = graph
        self.last_executable = entry.exe
        return entry

    def _fall_back(self, trace):
        where = trace.untraceable or "?"
        self._eager = where
        file, _, line = where.rpartition(":")
        text = (f"spora.jit: {getattr(self.fn, '__qualname__', self.fn)} cannot be compiled: Python control flow "
                f"at {where} depends on a tensor's value; running it eagerly from now on")
        if file and line.isdigit():
            warnings.warn_explicit(text, JitFallbackWarning, file, int(line))
        else:
            warnings.warn(text, JitFallbackWarning, stacklevel=3)
        return _EAGER


def _open(fn, device):
    """A new graph named after fn and the top-level trace recording it."""
    name = getattr(fn, "__name__", "jit")
    graph = _C.Graph(name if name.isidentifier() else "jit")
    state = TraceState("top")
    return graph, state, state.open(graph, device)


def _record(fn, state, trace, leaves, treedef):
    """Runs fn on symbolic stand-ins for the tensor leaves (Parameters are
    lifted as weights when read) and sets the graph's outputs: fn's tensors,
    then each assigned Parameter's new value. Returns (values, static,
    out_def, assigned), or None when fn's control flow needs a tensor value."""
    graph = trace.graph
    sym = []
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor) and not x._is_param:
            sym.append(_C.symbolic(trace, state.bind_input(x, f"arg{i}")))
        else:
            sym.append(x)
    targs, tkwargs = _tree.unflatten(treedef, sym)
    _requested_passes.clear()
    _C.push_trace(trace)
    try:
        out = fn(*targs, **tkwargs)
    except _C.UntraceableError:
        return None
    finally:
        _C.pop_trace(trace)
    if trace.untraceable:  # the function caught the error itself
        return None
    out_leaves, out_def = _tree.flatten(out)
    values, static = [], []
    for x in out_leaves:
        if isinstance(x, Tensor):
            values.append(state.value(x))
            static.append(_TENSOR)
        else:
            static.append(x)
    assigned = [p for p, _ in state.assigned.values()]
    values += [state.value(v) for _, v in state.assigned.values()]
    graph.set_outputs(values)
    return values, static, out_def, assigned


def trace_step(fn, args, kwargs=None, device=None):
    """Traces fn(*args, **kwargs) as spora.jit would, without compiling or
    running it (spora.parallel.plan): returns (graph, state, n_out,
    assigned). Tensors declared without data are fine as arguments and as
    Parameters: only shapes and dtypes are read."""
    leaves, treedef = _tree.flatten((tuple(args), dict(kwargs or {})))
    graph, state, trace = _open(fn, device if device is not None else _C.get_device())
    try:
        rec = _record(fn, state, trace, leaves, treedef)
        if rec is None:
            raise ValueError(f"[parallel] {getattr(fn, '__qualname__', fn)} cannot be traced: Python control flow "
                             f"at {trace.untraceable or '?'} depends on a tensor's value")
        values, _, _, assigned = rec
    finally:
        trace.close()
    return graph, state, len(values) - len(assigned), assigned


def jit(fn=None, *, level=None, device=None):
    """Compiles `fn` (use as @spora.jit, @spora.jit(level=2) or
    spora.jit(fn)). level: optimisation level (default: set_context's
    jit_level, 1). device: where graphs compile (default: the first tensor
    argument's device)."""
    if fn is None:
        return lambda f: JitFunction(f, level, device)
    if isinstance(fn, JitFunction):
        return fn
    return JitFunction(fn, level, device)


def compile_cell(cell, method="construct", level=None):
    """The JitFunction for cell.<method> (cached on the cell): what
    nn.Cell.__call__ uses in GRAPH_MODE. The cell's Parameters become graph
    weights; different cells get different caches."""
    cache = cell.__dict__.setdefault("_spora_jit_cache", {})
    f = cache.get(method)
    if f is None:
        f = JitFunction(getattr(cell, method), level)
        cache[method] = f
    return f
