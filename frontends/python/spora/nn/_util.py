"""Small helpers shared by spora.nn, spora.train and spora.serialization:
the seams to the core package (mode, tracing, jit), argument normalisation,
and the host random generator initializers and seeds draw from."""
import numpy as np

from .. import _C, Tensor, _context, _jit
from .. import _dtype

_rng = np.random.default_rng(0)


def set_seed(seed):
    global _rng
    _rng = np.random.default_rng(int(seed))


def rng():
    return _rng


def next_seed():
    """A fresh 63-bit seed for a random op, drawn from the seeded generator."""
    return int(_rng.integers(0, 2**62))


def is_tensor(x):
    return isinstance(x, Tensor)


def graph_mode():
    return _context.get_context("mode") == _context.GRAPH_MODE


def is_tracing():
    """True while spora.jit or spora.grad records a graph (then Cells run
    construct directly: the enclosing trace inlines it)."""
    return _C.current_trace() is not None


def jit(fn):
    return _jit.JitFunction(fn)


def before_graph_run(cell):
    """Hooks that must run on the host before each compiled run of `cell`
    (Dropout draws its next random numbers here: inside a graph a random op's
    seed is a constant)."""
    for _, c in cell.cells_and_names():
        hook = getattr(c, "_before_graph_run", None)
        if hook is not None:
            hook()


def set_name(param, name):
    param.name = name


def is_default_name(name):
    return name is None or name == "" or name == "Parameter"


def np_dtype(dtype):
    return np.dtype(_dtype.to_numpy_dtype(_dtype.get(dtype)))


def pair(v, what, op):
    """An int or a pair of ints as a list of two positive ints."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v), int(v))
    try:
        v = [int(x) for x in v]
    except TypeError:
        raise TypeError(f"[{op}] {what} must be an int or a pair of ints, got {v!r}") from None
    if len(v) != 2:
        raise ValueError(f"[{op}] {what} must be an int or a pair of ints, got {v!r}")
    return v


def check_rank(op, x, ranks, layout):
    if len(x.shape) not in ranks:
        raise ValueError(f"[{op}] expects input of shape {layout}, got shape {tuple(x.shape)}"
                         f"{_C_location()}")


def _C_location():
    """" (file.py:17)" for the user's line, or ""."""
    loc = _C._user_location()
    if not loc:
        return ""
    file, line = loc
    return f" ({file}:{line})"


def is_jit_tracing():
    """True while spora.jit traces symbolically (no values). PyNative
    spora.grad runs ops eagerly (on the eager tape, or in an older record
    mode of the trace), so this is False there."""
    tr = _C.current_trace()
    return tr is not None and not getattr(tr, "record", False)


def call_op(op, inputs, nout=1, **attrs):
    """A registry op whose output count depends on its inputs (the optimizer
    ops): spora.ops.raw infers counts only for split. Returns a tuple when
    nout > 1."""
    from .._tensor import _call
    return _call(op, list(inputs), nout=nout, **attrs)
