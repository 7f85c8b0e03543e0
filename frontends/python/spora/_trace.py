"""Trace state shared by spora.jit and spora.grad: how tensors that were not
recorded in a trace enter it (lifting), and Parameter assignments made while
tracing."""
from . import _C


class TraceState:
    """The Python side of one _C.Trace.

    mode "top" (a jit graph): Parameters become graph weights, other
    concrete tensors constants. mode "inner" (a function being
    differentiated): Parameters and tensors of an enclosing trace become
    inputs of this graph -- `bindings` lists what each input stands for, so
    the finished gradient graph can be run on them or inlined into the
    enclosing graph."""

    __slots__ = ("trace", "mode", "bindings", "memo", "weights", "weight_names", "assigned", "_names")

    def __init__(self, mode):
        self.trace = None
        self.mode = mode
        self.bindings = []   # inner: the tensor behind each graph input, in order
        self.memo = {}       # id(tensor) -> (value, tensor): each tensor enters once
        self.weights = []    # top: Parameters bound as weights, in order
        self.weight_names = {}  # top: id(Parameter) -> its weight's name in the graph
        self.assigned = {}   # id(param) -> (param, new value), in assignment order
        self._names = set()

    def open(self, graph, device):
        self.trace = _C.Trace(graph, device, self.lift, self)
        return self.trace

    def bind_input(self, t, name=None):
        """A new graph input standing for tensor t."""
        name = self._unique(name or f"in{len(self.bindings)}")
        v = self.trace.graph.add_input(name, t.dtype, t.shape)
        self.bindings.append(t)
        self.memo[id(t)] = (v, t)
        return v

    def _unique(self, name):
        base, k = name, 1
        while name in self._names:
            name = f"{base}_{k}"
            k += 1
        self._names.add(name)
        return name

    def value(self, t):
        """The value of tensor t in this trace (lifting it if needed)."""
        v = _C.value_of(t, self.trace)
        return v if v is not None else self.lift(t)

    def lift(self, t):
        key = id(t)
        a = self.assigned.get(key)
        if a is not None:
            return self.value(a[1])
        m = self.memo.get(key)
        if m is not None:
            return m[0]
        g = self.trace.graph
        if t._is_param and self.mode == "top":
            name = self._unique(getattr(t, "name", None) or f"weight{len(self.weights)}")
            v = g.add_weight(name, t.dtype, t.shape)  # a split Parameter's whole shape
            self.weights.append(t)
            self.weight_names[key] = name
        elif t._is_param or _C.trace_of(t) is not None:
            return self.bind_input(t, getattr(t, "name", None))
        else:
            v = g.add_constant(t)
        self.memo[key] = (v, t)
        return v

    def assign(self, param, value):
        self.assigned.pop(id(param), None)  # re-insert: order of last assignment
        self.assigned[id(param)] = (param, value)


def value_in(trace, t):
    """The value of t in `trace` (a _C.Trace), lifting it through its state."""
    return trace.state.value(t)
