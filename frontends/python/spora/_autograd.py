"""spora.grad and spora.value_and_grad (MindSpore semantics).

The function is recorded into a graph, the graph is differentiated with
spora_graph_grad, and the gradient graph runs:
  - PyNative (no enclosing trace): the function runs eagerly while it is
    recorded ("record" mode), so Python control flow on tensor values works;
    the gradient graph then runs op by op (spora_graph_run_eager);
  - inside jit or another grad: the gradient graph is inlined into the
    enclosing graph (spora_graph_inline), so a whole training step compiles
    as one graph and higher-order gradients come from nesting.
  - GRAPH_MODE at top level: the grad function itself runs through spora.jit.
(The eager tape C API, when it lands, can replace record mode without
changing this interface.)
"""
from . import _C
from . import _context
from ._jit import JitFunction
from ._tensor import Tensor
from ._trace import TraceState


def _positions(grad_position, nargs):
    if grad_position is None:
        return ()
    if isinstance(grad_position, int):
        pos = (grad_position,)
    else:
        pos = tuple(grad_position)
    for p in pos:
        if not isinstance(p, int) or not -nargs <= p < nargs:
            raise ValueError(f"[grad] grad_position {p} is out of range for {nargs} positional arguments")
    return tuple(p % nargs for p in pos)


def _weights_list(weights):
    if weights is None:
        return []
    if isinstance(weights, Tensor):
        return [weights]
    return list(weights)


class GradFunction:
    def __init__(self, fn, grad_position, weights, has_aux, with_value):
        self.fn = fn
        self.grad_position = grad_position
        self.weights = weights
        self.has_aux = has_aux
        self.with_value = with_value
        self._jit = None
        self.__name__ = ("value_and_grad_" if with_value else "grad_") + getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if _context.get_context("mode") == _context.GRAPH_MODE and _C.current_trace() is None:
            if self._jit is None:
                self._jit = JitFunction(self._impl)
            return self._jit(*args, **kwargs)
        return self._impl(*args, **kwargs)

    def _impl(self, *args, **kwargs):
        parent = _C.current_trace()
        record = parent is None or parent.record
        positions = _positions(self.grad_position, len(args))
        weights = _weights_list(self.weights)
        if not positions and not weights:
            raise ValueError("[grad] nothing to differentiate: grad_position is None and no weights given")
        device = None
        for a in args:
            if isinstance(a, Tensor):
                device = a.device
                break
        device = device or _C.get_device()

        state = TraceState("inner")
        trace = state.open(_C.Graph("grad"), record, device)
        try:
            args = list(args)
            wrt = []
            for i in positions:
                a = args[i]
                if not isinstance(a, Tensor):
                    a = Tensor(a, device=device)
                if not a.dtype.is_floating_point:
                    raise TypeError(f"[grad] argument {i} is {a.dtype.name}; gradients need a floating-point tensor")
                v = state.bind_input(a, f"arg{i}")
                args[i] = _C.symbolic(trace, v, a if record else None)
                wrt.append(v)
            for w in weights:
                if not isinstance(w, Tensor) or not w.dtype.is_floating_point:
                    raise TypeError("[grad] weights must be floating-point Parameters")
                wrt.append(state.lift(w))

            _C.push_trace(trace)
            try:
                out = self.fn(*args, **kwargs)
            finally:
                _C.pop_trace(trace)
            if self.has_aux:
                if not isinstance(out, tuple) or len(out) < 2:
                    raise ValueError("[grad] has_aux=True needs the function to return a tuple (out, aux...)")
                loss, aux = out[0], tuple(out[1:])
            else:
                loss, aux = out, ()
            if isinstance(loss, (tuple, list)):
                # Several outputs: the gradient of their sum (MindSpore's
                # sens of ones); the value keeps them all.
                parts = list(loss)
                _C.push_trace(trace)
                try:
                    total = parts[0].sum()
                    for p in parts[1:]:
                        total = total + p.sum()
                finally:
                    _C.pop_trace(trace)
                fwd = [total] + parts
            else:
                fwd = [loss]
            n_val = len(fwd)
            aux_vals = [] if record else [state.value(a) for a in aux if isinstance(a, Tensor)]
            assigned = list(state.assigned.values())
            outputs = [state.value(t) for t in fwd] + aux_vals + [state.value(v) for _, v in assigned]
            trace.graph.set_outputs(outputs)
            gg = trace.graph.grad(wrt, 0)
        finally:
            trace.close()  # also on errors: the trace holds tensors and Python state

        n_fwd = len(outputs)
        if record:
            res = gg.run_eager(device, state.bindings)
            if parent is not None:  # keep it differentiable for the enclosing grad
                pv = [parent.state.value(b) for b in state.bindings]
                res = [_C.symbolic(parent, v, r) for v, r in zip(parent.graph.inline(gg, pv), res)]
        else:
            pv = [parent.state.value(b) for b in state.bindings]
            res = [_C.symbolic(parent, v) for v in parent.graph.inline(gg, pv)]

        values = res[:n_val]
        if not record:
            it = iter(res[n_val:n_val + len(aux_vals)])
            aux = tuple(next(it) if isinstance(a, Tensor) else a for a in aux)
        else:
            aux = tuple(a._detach() if isinstance(a, Tensor) and _C.has_value(a) else a for a in aux)
        new_vals = res[n_fwd - len(assigned):n_fwd]
        for (p, _), nv in zip(assigned, new_vals):
            if parent is None:
                p._set_value(nv)
            else:
                parent.state.assign(p, nv)
        grads = res[n_fwd:]

        gp, gw = grads[:len(positions)], grads[len(positions):]
        if isinstance(self.grad_position, int):
            pos_out = gp[0]
        else:
            pos_out = tuple(gp)
        if self.weights is None:
            g_out = pos_out
        elif self.grad_position is None:
            g_out = tuple(gw)
        else:
            g_out = (pos_out, tuple(gw))

        if len(values) > 1:
            value = tuple(values[1:])
        else:
            value = values[0]
        if self.has_aux:
            value = (value,) + aux
        if self.with_value:
            return value, g_out
        if self.has_aux:
            return g_out, aux
        return g_out


def grad(fn, grad_position=0, weights=None, has_aux=False):
    """A function computing the gradient of fn's output (summed if not a
    scalar) with respect to the positional arguments at grad_position (an
    int, a tuple of ints, or None) and/or `weights` (Parameters).

    Returns: one gradient for an int grad_position; a tuple for a tuple;
    a tuple of weight gradients when grad_position is None; (position
    gradients, weight gradients) when both. With has_aux=True fn returns
    (out, aux...), only out is differentiated, and the result is
    (gradients, aux)."""
    return GradFunction(fn, grad_position, weights, has_aux, False)


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False):
    """Like grad, returning (value, gradients); with has_aux value is
    (out, aux...)."""
    return GradFunction(fn, grad_position, weights, has_aux, True)
