"""spora.grad and spora.value_and_grad (MindSpore semantics).

  - PyNative (no enclosing trace): the function runs eagerly under a started
    eager tape (spora_tape_*), and spora_tape_gradient runs the backward ops
    on the recorded forward values. Python control flow on tensor values
    works; tapes nest, which gives higher-order gradients.
  - Inside jit (or a grad being traced there): the function is traced into
    its own graph, differentiated with spora_graph_grad, and the gradient
    graph is inlined into the enclosing graph (spora_graph_inline), so a
    whole training step -- forward, grad, optimizer update -- compiles as one
    graph, and nesting gives higher orders there too.
  - GRAPH_MODE at top level: the grad function itself runs through spora.jit.
"""
import threading

from . import _C
from . import _context
from . import _recompute
from ._jit import JitFunction
from ._tensor import Tensor
from ._trace import TraceState


# How many PyNative tapes this thread is recording under (spora.grad):
# eager collectives are not recorded on the tape, so they refuse to run
# there rather than yield a silently wrong gradient.
_recording = threading.local()


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

    def _split(self, out):
        if self.has_aux:
            if not isinstance(out, tuple) or len(out) < 2:
                raise ValueError("[grad] has_aux=True needs the function to return a tuple (out, aux...)")
            return out[0], tuple(out[1:])
        return out, ()

    def _impl(self, *args, **kwargs):
        parent = _C.current_trace()
        if parent is None:
            return self._impl_tape(args, kwargs)
        return self._impl_traced(parent, args, kwargs)

    def _impl_traced(self, parent, args, kwargs):
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
        trace = state.open(_C.Graph("grad"), device)
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
                args[i] = _C.symbolic(trace, v)
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
            loss, aux = self._split(out)
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
            aux_vals = [state.value(a) for a in aux if isinstance(a, Tensor)]
            assigned = list(state.assigned.values())
            outputs = [state.value(t) for t in fwd] + aux_vals + [state.value(v) for _, v in assigned]
            trace.graph.set_outputs(outputs)
            gg = trace.graph.grad(wrt, 0)
            if _recompute.used:  # here output 0 is the loss: the forward pass is what it depends on
                gg.run_pass("recompute")
        finally:
            trace.close()  # also on errors: the trace holds tensors and Python state

        # The gradient graph becomes part of the enclosing one.
        n_fwd = len(outputs)
        pv = [parent.state.value(b) for b in state.bindings]
        res = [_C.symbolic(parent, v) for v in parent.graph.inline(gg, pv)]
        values = res[:n_val]
        it = iter(res[n_val:n_val + len(aux_vals)])
        aux = tuple(next(it) if isinstance(a, Tensor) else a for a in aux)
        for (p, _), nv in zip(assigned, res[n_fwd - len(assigned):n_fwd]):
            parent.state.assign(p, nv)
        grads = res[n_fwd:]

        return self._result(values, aux, grads, len(positions))

    def _result(self, values, aux, grads, npos):
        gp, gw = grads[:npos], grads[npos:]
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

        value = tuple(values[1:]) if len(values) > 1 else values[0]
        if self.has_aux:
            value = (value,) + aux
        if self.with_value:
            return value, g_out
        if self.has_aux:
            return g_out, aux
        return g_out

    def _impl_tape(self, args, kwargs):
        positions = _positions(self.grad_position, len(args))
        weights = _weights_list(self.weights)
        if not positions and not weights:
            raise ValueError("[grad] nothing to differentiate: grad_position is None and no weights given")
        args = list(args)
        sources = []
        for i in positions:
            a = args[i]
            if not isinstance(a, Tensor):
                a = args[i] = Tensor(a)
            if not a.dtype.is_floating_point:
                raise TypeError(f"[grad] argument {i} is {a.dtype.name}; gradients need a floating-point tensor")
            sources.append(a)
        for w in weights:
            if not isinstance(w, Tensor) or not w.dtype.is_floating_point:
                raise TypeError("[grad] weights must be floating-point Parameters")
            sources.append(w)
        tape = _C.Tape()
        for x in sources:
            tape.watch(x)
        tape.start()
        _recording.depth = getattr(_recording, "depth", 0) + 1
        try:
            out = self.fn(*args, **kwargs)
            loss, aux = self._split(out)
            if isinstance(loss, (tuple, list)):
                # Several outputs: the gradient of their sum; the value keeps them all.
                parts = list(loss)
                total = parts[0].sum()
                for p in parts[1:]:
                    total = total + p.sum()
                values = [total] + parts
            else:
                values = [loss]
        finally:
            _recording.depth -= 1
            tape.stop()
        if not isinstance(values[0], Tensor):
            raise TypeError("[grad] the function must return a Tensor (or a tuple whose first item is one)")
        grads = tape.gradient(values[0], sources)
        return self._result(values, aux, grads, len(positions))


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
