"""References of the optimizer ops (docs/ops-optim.md): sgd_update and
adam_update as PyTorch's SGD, Adam and AdamW write them, global_norm and
clip_by_global_norm as clip_grad_norm_. Everything in float64; scalar
inputs arrive as 0-d arrays. Multi-step cases are looped by the harness
(harness.reference), feeding these functions their own outputs."""
import numpy as np

from . import ref


def _groups(tensors, roles):
    n = len(tensors) // roles
    return [tensors[r * n:(r + 1) * n] for r in range(roles)]


@ref("sgd_update")
def _sgd(x, a):
    lr, gs = float(x[0]), float(x[1])
    mom = a.get("momentum", 0.0)
    damp = a.get("dampening", 0.0)
    wd = a.get("weight_decay", 0.0)
    nesterov = a.get("nesterov", False)
    groups = _groups(x[2:], 3 if mom > 0 else 2)
    new_p, new_b = [], []
    for k, (p, g) in enumerate(zip(groups[0], groups[1])):
        d = gs * g + wd * p
        if mom > 0:
            b = mom * groups[2][k] + (1 - damp) * d
            new_b.append(b)
            d = d + mom * b if nesterov else b
        new_p.append(p - lr * d)
    return new_p + new_b


@ref("adam_update")
def _adam(x, a):
    lr, step, gs = float(x[0]), float(x[1]), float(x[2])
    b1, b2 = a.get("beta1", 0.9), a.get("beta2", 0.999)
    eps = a.get("eps", 1e-8)
    wd = a.get("weight_decay", 0.0)
    decoupled = a.get("decoupled", False)
    amsgrad = a.get("amsgrad", False)
    groups = _groups(x[3:], 5 if amsgrad else 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        if step >= 1:
            step_size = lr / (1 - b1 ** step)
            bc2_sqrt = np.sqrt(1 - b2 ** step)
        else:  # documented: bias correction at step < 1 gives NaN params
            step_size = bc2_sqrt = np.nan
        outs = [[], [], [], []]
        for k in range(len(groups[0])):
            p, g, m, v = (groups[r][k] for r in range(4))
            g = gs * g
            if decoupled:
                p = p * (1 - lr * wd)
            else:
                g = g + wd * p
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            vm = v
            if amsgrad:
                vm = np.maximum(groups[4][k], v)
                outs[3].append(vm)
            outs[0].append(p - step_size * m / (np.sqrt(vm) / bc2_sqrt + eps))
            outs[1].append(m)
            outs[2].append(v)
    return outs[0] + outs[1] + outs[2] + outs[3]


def _norm(tensors):
    return np.sqrt(sum(float(np.sum(np.square(t))) for t in tensors))


@ref("global_norm")
def _global_norm(x, a):
    return [np.asarray(_norm(x))]


@ref("clip_by_global_norm")
def _clip(x, a):
    norm = _norm(x)
    f = min(1.0, a["max_norm"] / (norm + 1e-6))
    return [t * f for t in x] + [np.asarray(norm)]
