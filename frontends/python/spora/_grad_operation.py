"""MindSpore's ops.GradOperation and ParameterTuple, over spora.grad.

    grad_op = ops.GradOperation(get_by_list=True)
    grads = grad_op(net, ParameterTuple(net.trainable_params()))(x, y)
"""
from ._autograd import grad
from ._tensor import Tensor


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore's ParameterTuple): what
    GradOperation(get_by_list=True) and optimizers take as weights."""

    def __new__(cls, params):
        params = tuple(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor) or not getattr(p, "_is_param", False):
                raise TypeError(f"[ParameterTuple] item {i} is a {type(p).__name__}, not a Parameter")
        return super().__new__(cls, params)


def _total(out, sens):
    """The scalar whose gradient is the gradient of `out` seeded with sens
    (ones when sens is None): sum(out * sens), over each output of a tuple."""
    outs = out if isinstance(out, tuple) else (out,)
    if sens is None:
        sens = (None,) * len(outs)
    elif not isinstance(out, tuple):
        sens = (sens,)
    if len(sens) != len(outs):
        raise ValueError(f"[GradOperation] sens has {len(sens)} entries for {len(outs)} outputs")
    total = None
    for o, s in zip(outs, sens):
        term = (o if s is None else o * s).sum()
        total = term if total is None else total + term
    return total


class GradOperation:
    """GradOperation(get_all=False, get_by_list=False, sens_param=False):
    grad_op(fn) or grad_op(fn, weights) is a function of fn's inputs
    returning gradients: of the first input (default), of every input
    (get_all), of weights (get_by_list), or ((inputs), (weights)) with both.
    A non-scalar output is differentiated as its sum (the gradient seeded
    with ones); with sens_param the last argument is that seed instead (a
    tuple of seeds for a tuple output)."""

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        self.get_all, self.get_by_list, self.sens_param = bool(get_all), bool(get_by_list), bool(sens_param)

    def __call__(self, fn, weights=None):
        if self.get_by_list and weights is None:
            raise ValueError("[GradOperation] get_by_list=True needs weights: grad_op(fn, ParameterTuple(...))")
        if not self.get_by_list and weights is not None:
            raise ValueError("[GradOperation] weights given without get_by_list=True")
        weights = tuple(weights) if weights is not None else None
        get_all, get_by_list, sens_param = self.get_all, self.get_by_list, self.sens_param

        def gradients(*args):
            sens = None
            if sens_param:
                if not args:
                    raise ValueError("[GradOperation] sens_param=True: give the sensitivity as the last argument")
                args, sens = args[:-1], args[-1]
            if not args and not get_by_list:
                raise ValueError("[GradOperation] fn has no inputs to differentiate")
            positions = tuple(range(len(args))) if get_all else (None if get_by_list else 0)
            g = grad(lambda *a: _total(fn(*a), sens), grad_position=positions, weights=weights)(*args)
            if get_all and get_by_list:
                return tuple(g[0]), tuple(g[1])
            return tuple(g) if (get_all or get_by_list) else g

        return gradients
