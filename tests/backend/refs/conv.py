"""References for the conv family: conv2d (+bias, transpose, gradients) and
2-D pooling (max, avg, adaptive avg, gradients), NCHW, PyTorch semantics.

Written with numpy by hand (no PyTorch here): a convolution is a sum over
kernel taps of strided slices of the padded input, and every gradient is the
exact adjoint of its forward (scatter-adds into a padded buffer, then crop).
"""
import numpy as np

from . import ref


def _pair(v, default):
    if v is None:
        return default
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _pad4(v):
    """padding attr -> (top, bottom, left, right)."""
    if v is None:
        return (0, 0, 0, 0)
    if isinstance(v, int):
        v = [v]
    v = list(v)
    if len(v) == 1:
        return (v[0],) * 4
    if len(v) == 2:
        return (v[0], v[0], v[1], v[1])
    return tuple(v)


def _conv_geom(a, h, w, kh, kw):
    """(stride, dilation, (top, bottom, left, right)) with pad_mode resolved."""
    s = _pair(a.get("stride"), (1, 1))
    d = _pair(a.get("dilation"), (1, 1))
    mode = a.get("pad_mode", "explicit")
    if mode == "valid":
        return s, d, (0, 0, 0, 0)
    if mode == "same":
        pads = []
        for n, k, st, dl in ((h, kh, s[0], d[0]), (w, kw, s[1], d[1])):
            out = -(-n // st)
            total = max((out - 1) * st + (k - 1) * dl + 1 - n, 0)
            pads += [total // 2, total - total // 2]
        return s, d, tuple(pads)
    return s, d, _pad4(a.get("padding"))


def _tap(start, stride, count):
    return slice(start, start + (count - 1) * stride + 1, stride)


def _conv_out(n, k, s, d, p0, p1):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def conv2d_np(x, w, a):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = a.get("groups", 1)
    s, d, p = _conv_geom(a, h, wd, kh, kw)
    oh = _conv_out(h, kh, s[0], d[0], p[0], p[1])
    ow = _conv_out(wd, kw, s[1], d[1], p[2], p[3])
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])))
    xg = xp.reshape(n, g, cg, xp.shape[2], xp.shape[3])
    wg = w.reshape(g, o // g, cg, kh, kw)
    y = np.zeros((n, g, o // g, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, _tap(i * d[0], s[0], oh), _tap(j * d[1], s[1], ow)]
            y += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    return y.reshape(n, o, oh, ow)


def conv2d_data_np(dy, w, out_hw, s, d, p, g):
    """Adjoint of conv2d in x: scatter dy through w into an (H, W) input.
    Only top/left padding matter; taps past the bottom/right are dropped."""
    n, o, oh, ow = dy.shape
    _, cg, kh, kw = w.shape
    h, wd = out_hw
    ph = max(h + p[0], (oh - 1) * s[0] + (kh - 1) * d[0] + 1)
    pw = max(wd + p[2], (ow - 1) * s[1] + (kw - 1) * d[1] + 1)
    dxp = np.zeros((n, g, cg, ph, pw))
    dyg = dy.reshape(n, g, o // g, oh, ow)
    wg = w.reshape(g, o // g, cg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, :, _tap(i * d[0], s[0], oh), _tap(j * d[1], s[1], ow)] += np.einsum(
                "ngohw,goc->ngchw", dyg, wg[:, :, :, i, j])
    return dxp[:, :, :, p[0]:p[0] + h, p[2]:p[2] + wd].reshape(n, g * cg, h, wd)


def conv2d_weight_np(x, dy, wshape, a):
    n, c, h, wd = x.shape
    o, cg, kh, kw = wshape
    g = a.get("groups", 1)
    s, d, p = _conv_geom(a, h, wd, kh, kw)
    _, _, oh, ow = dy.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])))
    xg = xp.reshape(n, g, cg, xp.shape[2], xp.shape[3])
    dyg = dy.reshape(n, g, o // g, oh, ow)
    dw = np.zeros((g, o // g, cg, kh, kw))
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, _tap(i * d[0], s[0], oh), _tap(j * d[1], s[1], ow)]
            dw[:, :, :, i, j] = np.einsum("ngchw,ngohw->goc", patch, dyg)
    return dw.reshape(o, cg, kh, kw)


@ref("conv2d")
def _conv2d(x, a):
    return [conv2d_np(x[0], x[1], a)]


@ref("conv2d_bias")
def _conv2d_bias(x, a):
    return [conv2d_np(x[0], x[1], a) + x[2].reshape(1, -1, 1, 1)]


@ref("conv2d_grad_input")
def _conv2d_grad_input(x, a):
    dy, w = x
    shape = a["input_shape"]
    s, d, p = _conv_geom(a, shape[2], shape[3], w.shape[2], w.shape[3])
    return [conv2d_data_np(dy, w, shape[2:], s, d, p, a.get("groups", 1))]


@ref("conv2d_grad_weight")
def _conv2d_grad_weight(x, a):
    return [conv2d_weight_np(x[0], x[1], a["weight_shape"], a)]


@ref("conv2d_transpose")
def _conv2d_transpose(x, a):
    inp, w = x
    s = _pair(a.get("stride"), (1, 1))
    d = _pair(a.get("dilation"), (1, 1))
    p = _pad4(a.get("padding"))
    op = _pair(a.get("output_padding"), (0, 0))
    kh, kw = w.shape[2:]
    h = (inp.shape[2] - 1) * s[0] - p[0] - p[1] + d[0] * (kh - 1) + op[0] + 1
    wd = (inp.shape[3] - 1) * s[1] - p[2] - p[3] + d[1] * (kw - 1) + op[1] + 1
    return [conv2d_data_np(inp, w, (h, wd), s, d, p, a.get("groups", 1))]


# -- pooling -----------------------------------------------------------------

def _pool_geom(a, shape, dilated):
    k = _pair(a["kernel_size"], None)
    s = _pair(a.get("stride") or None, k)
    d = _pair(a.get("dilation"), (1, 1)) if dilated else (1, 1)
    p = _pad4(a.get("padding"))
    ceil = bool(a.get("ceil_mode", False))
    out = []
    for i in range(2):
        n, lead = shape[2 + i], p[2 * i]
        span = n + lead + p[2 * i + 1] - d[i] * (k[i] - 1) - 1
        o = (-(-span // s[i]) if ceil else span // s[i]) + 1
        if ceil and (o - 1) * s[i] >= n + lead:
            o -= 1
        out.append(o)
    return k, s, d, p, out


def _windows(xp, k, s, d, out):
    """Stack of window taps, shape (N, C, OH, OW, kh*kw), in row-major tap order."""
    taps = [xp[:, :, _tap(i * d[0], s[0], out[0]), _tap(j * d[1], s[1], out[1])]
            for i in range(k[0]) for j in range(k[1])]
    return np.stack(taps, axis=-1)


def _padded(x, k, s, d, p, out, value):
    """x padded by (top, left) and enough at the bottom/right for every window."""
    h, w = x.shape[2:]
    bottom = max(p[1], (out[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1 - h - p[0])
    right = max(p[3], (out[1] - 1) * s[1] + d[1] * (k[1] - 1) + 1 - w - p[2])
    return np.pad(x, ((0, 0), (0, 0), (p[0], bottom), (p[2], right)), constant_values=value)


def _max_argmax(x, a):
    k, s, d, p, out = _pool_geom(a, x.shape, True)
    win = _windows(_padded(x, k, s, d, p, out, -np.inf), k, s, d, out)
    return win.max(axis=-1), win.argmax(axis=-1), (k, s, d, p, out)


@ref("max_pool2d")
def _max_pool2d(x, a):
    return [_max_argmax(x[0], a)[0]]


@ref("max_pool2d_grad")
def _max_pool2d_grad(x, a):
    xv, dy = x
    _, am, (k, s, d, p, out) = _max_argmax(xv, a)
    dxp = np.zeros(_padded(xv, k, s, d, p, out, 0).shape)
    n, c = xv.shape[:2]
    ni, ci, ri, qi = np.indices((n, c, out[0], out[1]))
    rows = ri * s[0] + (am // k[1]) * d[0]
    cols = qi * s[1] + (am % k[1]) * d[1]
    np.add.at(dxp, (ni, ci, rows, cols), dy)
    return [dxp[:, :, p[0]:p[0] + xv.shape[2], p[2]:p[2] + xv.shape[3]]]


def _avg_divisor(a, shape, k, s, p, out):
    """PyTorch's divisor per output position, shape (OH, OW)."""
    include = a.get("count_include_pad", True)
    div = []
    for i in range(2):
        n = shape[2 + i]
        st = np.arange(out[i]) * s[i] - p[2 * i]
        en = np.minimum(st + k[i], n + p[2 * i + 1])
        if include:
            div.append(en - st)
        else:
            div.append(np.minimum(en, n) - np.maximum(st, 0))
    return np.outer(div[0], div[1]).astype(np.float64)


@ref("avg_pool2d")
def _avg_pool2d(x, a):
    xv = x[0]
    k, s, d, p, out = _pool_geom(a, xv.shape, False)
    win = _windows(_padded(xv, k, s, d, p, out, 0.0), k, s, d, out)
    return [win.sum(axis=-1) / _avg_divisor(a, xv.shape, k, s, p, out)]


@ref("avg_pool2d_grad")
def _avg_pool2d_grad(x, a):
    dy = x[0]
    shape = a["input_shape"]
    k, s, d, p, out = _pool_geom(a, shape, False)
    g = dy / _avg_divisor(a, shape, k, s, p, out)
    dxp = np.zeros(_padded(np.zeros(shape), k, s, d, p, out, 0).shape)
    for i in range(k[0]):
        for j in range(k[1]):
            dxp[:, :, _tap(i, s[0], out[0]), _tap(j, s[1], out[1])] += g
    return [dxp[:, :, p[0]:p[0] + shape[2], p[2]:p[2] + shape[3]]]


def _bins(n, m):
    return [(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


@ref("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(x, a):
    xv = x[0]
    oh, ow = _pair(a["output_size"], None)
    y = np.zeros(xv.shape[:2] + (oh, ow))
    for r, (h0, h1) in enumerate(_bins(xv.shape[2], oh)):
        for q, (w0, w1) in enumerate(_bins(xv.shape[3], ow)):
            y[:, :, r, q] = xv[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return [y]


@ref("adaptive_avg_pool2d_grad")
def _adaptive_avg_pool2d_grad(x, a):
    dy = x[0]
    shape = a["input_shape"]
    dx = np.zeros(shape)
    for r, (h0, h1) in enumerate(_bins(shape[2], dy.shape[2])):
        for q, (w0, w1) in enumerate(_bins(shape[3], dy.shape[3])):
            dx[:, :, h0:h1, w0:w1] += (dy[:, :, r, q] / ((h1 - h0) * (w1 - w0)))[:, :, None, None]
    return [dx]

