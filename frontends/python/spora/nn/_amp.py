"""The mechanics of mixed precision inside nn.Cell (spora.amp is the public
API): which dtype a cell runs in, casting its inputs and the Parameters it
reads, and handing the work to the core's mixed_precision pass when the
cell is compiled.

Two ways a cell gets a low-precision dtype:
  - Cell.to_float(dtype): explicit, honoured in every mode;
  - spora.amp.auto_mixed_precision: an AutoMark per cell. When the mark
    says the core pass can do the same job (bf16 at O1/O2) and the cell is
    being traced by spora.jit, the cell runs in f32 and the trace asks for
    optimisation level 2, where the mixed_precision pass converts the
    matrix products (forward and backward) to bf16 with one cast per value;
    run eagerly (PyNative), the cell casts at its boundaries instead.
"""
from collections import namedtuple

from .. import Tensor, _dtype, _jit, _tree
from . import _util

# dtype: what the cell runs in; use_pass: a compiled trace may leave this to
# the core pass instead; output_f32: cast the cell's floating outputs back
# to f32 (O1's converted cells, the whole network at O2/O3).
AutoMark = namedtuple("AutoMark", ("dtype", "use_pass", "output_f32"))

LOW = ("float16", "bfloat16")


def check_dtype(dtype, where, allow_f32=False):
    try:
        dt = _dtype.get(dtype)
    except (TypeError, ValueError, KeyError):
        dt = None
    ok = LOW + (("float32",) if allow_f32 else ())
    if dt is None or dt.name not in ok:
        raise TypeError(f"[{where}] dtype must be one of {', '.join('spora.' + n for n in ok)}, got {dtype!r}")
    return dt


def _cast(x, dt):
    if isinstance(x, Tensor) and x.dtype.is_floating_point and x.dtype != dt:
        return x.astype(dt)
    return x


def cast_tree(obj, dt):
    leaves, treedef = _tree.flatten(obj)
    return _tree.unflatten(treedef, [_cast(x, dt) for x in leaves])


def param_view(p, dt):
    """What construct sees for Parameter p while its cell runs in dt: a cast
    of a trainable floating Parameter (differentiable: its gradient arrives
    in p's dtype), the Parameter itself otherwise (state such as BatchNorm's
    moving statistics is assigned to, so it must stay the Parameter)."""
    if p.requires_grad and p.dtype.is_floating_point and p.dtype != dt:
        return p.astype(dt)
    return p


def effective_dtype(cell):
    """The dtype cell runs in now, or None for "as written"."""
    if cell._amp_dtype is not None:
        return cell._amp_dtype
    mark = cell._amp_auto
    if mark is None:
        return None
    if mark.use_pass and _util.is_jit_tracing():
        _jit.request_level(2)  # the mixed_precision pass does this cell's job
        return None
    return mark.dtype


def _caller_dtype(args, kwargs):
    for x in _tree.flatten((args, kwargs))[0]:
        if isinstance(x, Tensor) and x.dtype.is_floating_point:
            return x.dtype
    return None


def call(cell, args, kwargs):
    """Runs cell.construct in the cell's amp dtype: floating inputs cast to
    it, Parameters read as casts, and floating outputs cast back to the
    dtype the cell was called with (ops do not mix dtypes, so a bf16 cell
    inside an f32 network must hand f32 on; bf16 -> f32 -> bf16 is exact,
    so a chain of such cells loses nothing but the cast time)."""
    dt = effective_dtype(cell)
    if dt is None:
        return cell.construct(*args, **kwargs)
    back = _caller_dtype(args, kwargs)
    args = cast_tree(args, dt)
    kwargs = cast_tree(kwargs, dt) if kwargs else kwargs
    prev = cell._amp_active
    object.__setattr__(cell, "_amp_active", dt)
    try:
        out = cell.construct(*args, **kwargs)
    finally:
        object.__setattr__(cell, "_amp_active", prev)
    mark = cell._amp_auto
    if mark is not None and mark.output_f32 and cell._amp_dtype is None:
        back = _dtype.float32  # the top of an auto_mixed_precision network returns f32
    if back is not None and back != dt:
        out = cast_tree(out, back)
    return out
