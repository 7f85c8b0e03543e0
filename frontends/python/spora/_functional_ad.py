"""mindspore.vjp and mindspore.jvp over spora.grad.

vjp(fn, *inputs) runs fn once and returns its output and vjp_fn, where
vjp_fn(v) is v^T J: the gradient of sum(fn(*inputs) * v) with respect to
each input (one reverse pass per call). jvp(fn, inputs, v) returns fn's
output and J v, computed as the gradient with respect to u of
sum(vjp(u) * v) -- a reverse pass through a reverse pass (Spora's
gradients nest), so it costs about two backward passes rather than one
forward-mode pass.
"""
from ._autograd import grad
from ._tensor import Tensor


def _as_tuple(x, what):
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x)
    raise TypeError(f"[{what}] expects a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _split_aux(out, has_aux, what):
    if not has_aux:
        return out, None
    if not isinstance(out, tuple) or len(out) < 2:
        raise ValueError(f"[{what}] has_aux=True needs fn to return more than one output")
    return out[0], (out[1] if len(out) == 2 else tuple(out[1:]))


def _dot(out, v, what):
    """sum(out * v) over each output of a tuple."""
    outs, vs = _as_tuple(out, what), _as_tuple(v, what)
    if len(outs) != len(vs):
        raise ValueError(f"[{what}] v has {len(vs)} tensors for {len(outs)} outputs")
    total = None
    for o, w in zip(outs, vs):
        if tuple(o.shape) != tuple(w.shape):
            raise ValueError(f"[{what}] v's shape {tuple(w.shape)} differs from the output's {tuple(o.shape)}")
        term = (o * w.astype(o.dtype)).sum()
        total = term if total is None else total + term
    return total


def vjp(fn, *inputs, weights=None, has_aux=False):
    """(output, vjp_fn), or (output, vjp_fn, aux) with has_aux (fn's first
    output is differentiated, the others returned as they are). vjp_fn(v),
    v shaped like the output (a tuple for several outputs), returns the
    tuple of v^T J for each input; with weights, (that tuple, the weights'
    gradients)."""
    if not inputs:
        raise ValueError("[vjp] give the inputs: vjp(fn, x, ...)")
    out, aux = _split_aux(fn(*inputs), has_aux, "vjp")
    positions = tuple(range(len(inputs)))

    def vjp_fn(*v):
        seed = v[0] if len(v) == 1 else tuple(v)

        def scalar(*a):
            o, _ = _split_aux(fn(*a), has_aux, "vjp")
            return _dot(o, seed, "vjp")

        g = grad(scalar, grad_position=positions, weights=weights)(*inputs)
        if weights is None:
            return tuple(g)
        return tuple(g[0]), tuple(g[1])

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def jvp(fn, inputs, v, has_aux=False):
    """(output, J v), or (output, J v, aux) with has_aux: inputs a Tensor or
    a tuple of them, v of the same shapes. J v has the output's structure."""
    xs = _as_tuple(inputs, "jvp")
    vs = _as_tuple(v, "jvp")
    if len(vs) != len(xs):
        raise ValueError(f"[jvp] v has {len(vs)} tensors for {len(xs)} inputs")
    out, aux = _split_aux(fn(*xs), has_aux, "jvp")
    outs = _as_tuple(out, "jvp")
    n = len(xs)

    def projected(*us):
        # <v^T J seeded with u, v>: linear in u, its gradient in u is J v.
        def scalar(*a):
            o, _ = _split_aux(fn(*a), has_aux, "jvp")
            return _dot(o, us if len(us) > 1 else us[0], "jvp")

        g = grad(scalar, grad_position=tuple(range(n)))(*xs)
        total = None
        for gi, vi in zip(g, vs):
            term = (gi * vi.astype(gi.dtype)).sum()
            total = term if total is None else total + term
        return total

    zeros = tuple(o * 0.0 for o in outs)
    jv = grad(projected, grad_position=tuple(range(len(outs))))(*zeros)
    jv = tuple(jv) if isinstance(jv, (tuple, list)) else (jv,)
    result = jv[0] if isinstance(out, Tensor) else jv
    return (out, result, aux) if has_aux else (out, result)
