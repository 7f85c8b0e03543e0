"""Helpers for the spora.nn / spora.train tests: numpy views and gradient
checks against central finite differences in float64."""
import numpy as np

import spora


def np_(t):
    return t.asnumpy() if hasattr(t, "asnumpy") else np.asarray(t)


def _probe(out_shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in out_shapes]


def _as_tuple(out):
    return out if isinstance(out, (tuple, list)) else (out,)


def scalar_loss(cell, inputs, probes):
    """sum_k sum(out_k * probe_k) as a spora scalar: a loss whose gradient
    reaches every output element with a different weight."""
    outs = _as_tuple(cell(*inputs))
    total = None
    for o, w in zip(outs, probes):
        if o is None:
            continue
        term = (o * spora.Tensor(w.astype(np.float64)).astype(o.dtype)).sum()
        total = term if total is None else total + term
    return total


def check_grads(cell, inputs, wrt_inputs=(0,), params=True, rtol=1e-5, atol=1e-6, samples=12, seed=0,
                eps=1e-6):
    """Gradients of a probe loss w.r.t. the chosen inputs and the trainable
    parameters (spora.value_and_grad) against central differences. Inputs
    and parameters must be float64. At most `samples` elements per tensor
    are perturbed (chosen at random)."""
    outs = _as_tuple(cell(*inputs))
    probes = _probe([tuple(o.shape) for o in outs if o is not None], seed)
    weights = cell.trainable_params() if params else None

    def f(*xs):
        return scalar_loss(cell, xs, probes)

    grad_fn = spora.value_and_grad(f, grad_position=tuple(wrt_inputs) if wrt_inputs else None, weights=weights)
    _, grads = grad_fn(*inputs)
    if wrt_inputs and weights:
        g_in, g_w = grads
    elif wrt_inputs:
        g_in, g_w = grads, ()
    else:
        g_in, g_w = (), grads
    g_in = _as_tuple(g_in)
    g_w = _as_tuple(g_w)
    rng = np.random.default_rng(seed + 1)

    def loss_value():
        return float(np_(scalar_loss(cell, inputs, probes)))

    def compare(what, analytic, get, put):
        base = get().copy()
        flat = base.reshape(-1)
        picks = rng.choice(flat.size, size=min(samples, flat.size), replace=False)
        a = np_(analytic).reshape(-1)
        for i in picks:
            plus, minus = flat.copy(), flat.copy()
            plus[i] += eps
            minus[i] -= eps
            put(plus.reshape(base.shape))
            lp = loss_value()
            put(minus.reshape(base.shape))
            lm = loss_value()
            put(base)
            num = (lp - lm) / (2 * eps)
            assert abs(a[i] - num) <= atol + rtol * max(abs(num), abs(a[i])), \
                f"{what}[{i}]: analytic {a[i]} vs numeric {num}"

    inputs = list(inputs)
    for k, g in zip(wrt_inputs or (), g_in):
        def get(k=k):
            return np_(inputs[k])

        def put(v, k=k):
            inputs[k] = spora.Tensor(v)
        compare(f"input {k}", g, get, put)
    for p, g in zip(weights or (), g_w):
        compare(p.name, g, lambda p=p: np_(p), lambda v, p=p: p.set_data(spora.Tensor(v)))
