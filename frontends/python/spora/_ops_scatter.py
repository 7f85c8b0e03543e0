"""MindSpore's scatter functions, over the registry's scatter_add (PyTorch's form: indices and
updates of x's rank, added along an axis; ops.raw.scatter_add).

- ops.scatter_add(input_x, indices, updates): MindSpore's form: indices of any shape pick rows
  (dim 0) of input_x, updates has shape indices.shape + input_x.shape[1:]; each is added into its
  row (repeated indices accumulate). A Parameter is updated in place, as in MindSpore (inside jit
  too); the result is returned either way. PyTorch's form (indices and updates of input_x's rank,
  `axis=` as keyword) still works: the shapes tell the two apart, and where both fit (1-D) they
  agree.
- ops.tensor_scatter_add(input_x, indices, updates): indices (..., N) index input_x's first N dims
  (as gather_nd reads them); updates has shape indices.shape[:-1] + input_x.shape[N:]. Returns a
  new tensor.

An index in [-dim, 0) counts from the end, as in NumPy; one outside [-dim, dim) adds nothing
(MindSpore's CPU kernels raise for both; reading indices back to check them would stop graphs from
compiling, so the registry op skips them on every device alike). Gradients reach input_x and
updates.
"""
import math

from ._argcheck import _index_tensor, _kind, _tensor
from ._tensor import Tensor, _call


def _rows_scatter(x, flat_index, updates, tail):
    """x (P, *tail) with updates (M, *tail) added at rows flat_index (M,)."""
    m = flat_index.shape[0]
    idx = flat_index.reshape((m,) + (1,) * len(tail)).broadcast_to((m,) + tail)
    return _call("scatter_add", [x, idx, updates], axis=0)


def scatter_add(input_x, indices, updates, axis=None):
    """MindSpore's ops.scatter_add (see the module's note); with `axis` (or indices, updates and
    input_x of one rank, other than MindSpore's shapes) PyTorch's scatter_add."""
    op = "scatter_add"
    x = _tensor(input_x, op, "input_x")
    idx = _index_tensor(indices, op, "indices")
    upd = _tensor(updates, op, "updates", x)
    xs, js, us = tuple(x.shape), tuple(idx.shape), tuple(upd.shape)
    mindspore_form = len(xs) >= 1 and us == js + xs[1:]
    if axis is not None or (not mindspore_form and len(js) == len(xs) == len(us)):
        return _call("scatter_add", [x, idx, upd], axis=0 if axis is None else int(axis))
    if not mindspore_form:
        raise ValueError(f"[{op}] updates must have shape indices.shape + input_x.shape[1:] = {js + xs[1:]} "
                         f"(input_x {xs}, indices {js}), got {us}; or pass indices and updates of input_x's rank "
                         "with axis= (PyTorch's scatter_add)")
    tail = xs[1:]
    m = math.prod(js)
    y = _rows_scatter(x, idx.reshape((m,)), upd.reshape((m,) + tail), tail)
    if hasattr(input_x, "assign_value"):  # a Parameter: updated in place, as MindSpore does (jit too)
        input_x.assign_value(y)
    return y


def tensor_scatter_add(input_x, indices, updates):
    """MindSpore's ops.tensor_scatter_add: a copy of input_x with updates added at the positions
    indices (..., N) gives (see the module's note)."""
    op = "tensor_scatter_add"
    x = _tensor(input_x, op, "input_x")
    idx = _index_tensor(indices, op, "indices")
    upd = _tensor(updates, op, "updates", x)
    xs, js, us = tuple(x.shape), tuple(idx.shape), tuple(upd.shape)
    if len(js) < 1 or not 1 <= js[-1] <= len(xs):
        raise ValueError(f"[{op}] indices must have shape (..., N) with 1 <= N <= input_x's rank {len(xs)}, "
                         f"got {js}")
    n = js[-1]
    lead, tail = xs[:n], xs[n:]
    if us != js[:-1] + tail:
        raise ValueError(f"[{op}] updates must have shape indices.shape[:-1] + input_x.shape[{n}:] = "
                         f"{js[:-1] + tail} (input_x {xs}, indices {js}), got {us}")
    if not isinstance(upd, Tensor) or upd.dtype != x.dtype:
        raise TypeError(f"[{op}] updates must have input_x's dtype {x.dtype.name}, got {_kind(upd)}")
    m = math.prod(js[:-1])
    rows = math.prod(lead)
    flat = idx.reshape((m, n))
    # Row-major position in input_x's first n dims; a position with any index outside its dim is
    # sent past the end (skipped), so it cannot alias another row.
    lin, inside, stride = None, None, 1
    for d in reversed(range(n)):
        c = flat[:, d]
        c = _call("where", [c < 0, c + lead[d], c])
        ok = (c >= 0) & (c < lead[d])
        lin = c * stride if lin is None else lin + c * stride
        inside = ok if inside is None else inside & ok
        stride *= lead[d]
    lin = _call("where", [inside, lin, _tensor(rows, op, "indices", lin)])
    y = _rows_scatter(x.reshape((rows,) + tail), lin, upd.reshape((m,) + tail), tail)
    return y.reshape(xs)
