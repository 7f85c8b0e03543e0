"""References for the layout and indexing family: concat, stack, split,
slice, strided_slice, broadcast_to, expand_dims, squeeze, pad, tile, flip,
gather, embedding, index_select, gather_nd, gather_elements, scatter_add,
one_hot.
(reshape and transpose are in basic.py.)

Spora's rule for index values: i in [-n, n) selects i (negatives wrap like
numpy); anything else selects nothing: gathers leave zeros, scatter_add drops
the update, one_hot leaves the row at off_value."""
import numpy as np

from . import ref


def _wrap(idx, n):
    """(positions, valid mask) for index values against a dim of size n."""
    idx = np.asarray(idx).astype(np.int64)
    pos = np.where(idx < 0, idx + n, idx)
    valid = (pos >= 0) & (pos < n)
    return np.where(valid, pos, 0), valid


def _take(x, idx, axis):
    axis = axis % x.ndim
    n = x.shape[axis]
    pos, valid = _wrap(idx, n)
    shape = x.shape[:axis] + pos.shape + x.shape[axis + 1:]
    if n == 0:
        return np.zeros(shape, x.dtype)
    out = np.take(x, pos, axis=axis)
    mask = valid.reshape((1,) * axis + valid.shape + (1,) * (x.ndim - axis - 1))
    return np.where(mask, out, np.zeros((), x.dtype))


@ref("concat")
def _concat(x, a):
    return [np.concatenate(x, axis=a.get("axis", 0))]


@ref("stack")
def _stack(x, a):
    return [np.stack(x, axis=a.get("axis", 0))]


@ref("split")
def _split(x, a):
    v, axis = x[0], a.get("axis", 0)
    if a.get("sections"):
        return list(np.split(v, a["sections"], axis=axis))
    return list(np.split(v, np.cumsum(a["sizes"])[:-1], axis=axis))


@ref("slice")
def _slice(x, a):
    v = x[0]
    starts, ends = a["starts"], a["ends"]
    axes = a.get("axes") or list(range(len(starts)))
    sl = [slice(None)] * v.ndim
    for s, e, ax in zip(starts, ends, axes):
        sl[ax] = slice(s, e)
    return [v[tuple(sl)]]


@ref("strided_slice")
def _strided_slice(x, a):
    begin, end = a["begin"], a["end"]
    strides = a.get("strides") or [1] * len(begin)
    return [x[0][tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))]]


@ref("broadcast_to")
def _broadcast_to(x, a):
    return [np.broadcast_to(x[0], a["shape"]).copy()]


@ref("expand_dims")
def _expand_dims(x, a):
    axes = a["axes"]
    return [np.expand_dims(x[0], tuple(axes) if isinstance(axes, list) else axes)]


@ref("squeeze")
def _squeeze(x, a):
    axes = a.get("axes")
    return [np.squeeze(x[0], axis=tuple(axes) if axes else None)]


@ref("pad")
def _pad(x, a):
    v, pads = x[0], a["pads"]
    if v.ndim == 0:  # np.pad cannot take an empty pad_width
        return [v.copy()]
    widths = np.asarray(pads, np.int64).reshape(v.ndim, 2)
    mode = a.get("mode", "constant")
    if mode == "constant":
        return [np.pad(v, widths, constant_values=a.get("value", 0))]
    return [np.pad(v, widths, mode=mode)]


@ref("tile")
def _tile(x, a):
    return [np.tile(x[0], a["reps"])]


@ref("flip")
def _flip(x, a):
    axes = a.get("axes")
    return [np.flip(x[0], axis=tuple(axes) if axes else None).copy()]


@ref("gather")
def _gather(x, a):
    return [_take(x[0], x[1], a.get("axis", 0))]


@ref("embedding")
def _embedding(x, a):
    return [_take(x[0], x[1], 0)]


@ref("index_select")
def _index_select(x, a):
    return [_take(x[0], x[1], a.get("axis", 0))]


@ref("gather_nd")
def _gather_nd(x, a):
    v, idx = x[0], np.asarray(x[1]).astype(np.int64)
    q = idx.shape[-1]
    rows = idx.reshape(int(np.prod(idx.shape[:-1])), q)
    out = np.zeros((rows.shape[0],) + v.shape[q:], v.dtype)
    for j, row in enumerate(rows):
        pos = []
        for k in range(q):
            p, ok = _wrap(row[k], v.shape[k])
            if not ok:
                break
            pos.append(int(p))
        else:
            out[j] = v[tuple(pos)]
    return [out.reshape(idx.shape[:-1] + v.shape[q:])]


@ref("gather_elements")
def _gather_elements(x, a):
    """torch.gather: out[p] = v[p with p[axis] = idx[p]]; out-of-range
    indices give zeros (Spora's rule above)."""
    v, idx = x[0], np.asarray(x[1]).astype(np.int64)
    shape = idx.shape
    if v.ndim == 0:
        v, idx = v.reshape(1), idx.reshape(1)
    axis = a.get("axis", 0) % v.ndim
    pos, valid = _wrap(idx, v.shape[axis])
    # Other dims of idx are no larger than v's: index v by p directly.
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = pos
    out = np.where(valid, v[tuple(grid)] if v.shape[axis] else np.zeros(idx.shape, v.dtype), np.zeros((), v.dtype))
    return [out.astype(v.dtype).reshape(shape)]


@ref("scatter_add")
def _scatter_add(x, a):
    v, idx, upd = x[0], np.asarray(x[1]).astype(np.int64), x[2]
    out = v.copy()
    if v.ndim == 0:
        out, idx, upd = out.reshape(1), idx.reshape(1), upd.reshape(1)
    axis = a.get("axis", 0) % out.ndim
    n = out.shape[axis]
    for p in np.ndindex(*idx.shape):
        i = int(idx[p])
        if i < 0:
            i += n
        if not 0 <= i < n:
            continue
        # numpy adds bools as "or"; the cases keep integer sums in range.
        out[p[:axis] + (i,) + p[axis + 1:]] += upd[p]
    return [out.reshape(v.shape)]


@ref("one_hot")
def _one_hot(x, a):
    idx = np.asarray(x[0]).astype(np.int64)
    depth = a["depth"]
    on, off = a.get("on_value", 1.0), a.get("off_value", 0.0)
    pos, valid = _wrap(idx, depth)
    hot = (np.arange(depth) == pos[..., None]) & valid[..., None]
    out = np.where(hot, on, off).astype(np.float64)
    dt = a.get("dtype", "f32")
    if dt == "bool":
        return [out != 0]
    if dt in ("i32", "i64", "u8"):
        return [out.astype({"i32": np.int32, "i64": np.int64, "u8": np.uint8}[dt])]
    return [out]
