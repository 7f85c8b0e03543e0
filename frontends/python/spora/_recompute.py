"""Recomputation marks (MindSpore's Cell.recompute() and
Primitive.recompute(); docs/parallel.md, "Recomputation").

A recomputed Cell called while a graph is being traced marks the op nodes
its call recorded with a number naming that call (>= 2): the core's
recompute pass then computes them again in the backward pass instead of
keeping their outputs, except the values the forward pass reads outside the
call (the cell's outputs). A Primitive marked with recompute() carries the
attribute recompute=True on its own node (1: that op alone), which wins over
an enclosing cell's mark; recompute(False) keeps the op's output (0).
Outside graph tracing (PyNative) the marks change nothing.

spora.grad runs the pass on each gradient graph it builds while any mark
exists (`used`), before inlining it into the enclosing step: there the
forward pass is exactly what the differentiated output depends on."""
import itertools

from . import _C

# Set once any Cell or Primitive asked for recomputation in this process.
used = False

_region_ids = itertools.count(2)

# MindSpore's Cell.recompute keyword arguments. Communication ops are never
# recomputed here (their outputs are kept), whatever mp_comm_recompute says;
# parallel_optimizer_comm_recompute and recompute_slice_activation concern
# communication and slicing this framework does not add around a cell.
CELL_OPTIONS = ("mp_comm_recompute", "parallel_optimizer_comm_recompute", "recompute_slice_activation")


def cell_options(kwargs):
    """Checks Cell.recompute's keyword arguments; returns them as a dict."""
    for k, v in kwargs.items():
        if k not in CELL_OPTIONS:
            raise TypeError(f"[Cell.recompute] unknown keyword argument '{k}' (takes: {', '.join(CELL_OPTIONS)})")
        if not isinstance(v, bool):
            raise TypeError(f"[Cell.recompute] {k} must be a bool, got {v!r}")
    global used
    used = True
    return dict(kwargs)


def mark_primitive():
    global used
    used = True


def call_marked(cell, args, kwargs):
    """cell(*args, **kwargs) while tracing, the op nodes it records marked
    as one region (its options are set aside during the call, so the call
    itself runs as an unmarked cell's does)."""
    graph = _C.current_trace().graph
    first = graph.num_nodes()
    options = cell.__dict__.pop("_recompute")
    try:
        out = cell(*args, **kwargs)
    finally:
        cell.__dict__["_recompute"] = options
    graph.mark_recompute(first, graph.num_nodes(), next(_region_ids))
    return out
