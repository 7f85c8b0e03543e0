"""Primitives with sharding strategies (MindSpore's ops.MatMul().shard(...)):
an op object whose calls carry its strategy to the graph node, where the
SPMD pass (semi_auto_parallel, docs/parallel.md) reads it. Outside
semi_auto_parallel the strategy changes nothing."""
import numpy as np

from ._tensor import Tensor, _call


def strategy_string(strategy, what):
    """((4, 1), (1, 1)) -> "4,1;1,1"; a dim may name a mesh axis ("dp")."""
    if not isinstance(strategy, (tuple, list)) or not all(isinstance(s, (tuple, list)) for s in strategy):
        raise TypeError(f"[{what}] a strategy is a tuple with one tuple per input, e.g. ((4, 1), (1, 1)); "
                        f"got {strategy!r}")
    parts = []
    for s in strategy:
        dims = []
        for x in s:
            if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and int(x) >= 1:
                dims.append(str(int(x)))
            elif isinstance(x, str) and x.isidentifier():
                dims.append(x)
            else:
                raise ValueError(f"[{what}] strategy {strategy!r}: {x!r} is neither a block count >= 1 nor a mesh "
                                 "axis name")
        parts.append(",".join(dims))
    return ";".join(parts)


class Primitive:
    """An op of the registry by name, with fixed attributes and an optional
    strategy (shard)."""

    def __init__(self, op, nout=1, **attrs):
        self.op = op
        self.nout = nout
        self.attrs = attrs
        self.strategy = None

    def shard(self, in_strategy):
        """Sets the strategy (one tuple per input); returns self."""
        self.strategy = strategy_string(in_strategy, self.op)
        return self

    def recompute(self, mode=True):
        """Recomputation of this op (MindSpore's Primitive.recompute): in
        graph mode, mode=True computes it again in the backward pass instead
        of keeping its output; mode=False keeps its output even inside a
        recomputed Cell. Returns self."""
        if not isinstance(mode, bool):
            raise TypeError(f"[{self.op}] recompute's mode must be a bool, got {mode!r}")
        from . import _recompute
        _recompute.mark_primitive()
        self.attrs["recompute"] = mode
        return self

    def __call__(self, *inputs):
        ts = []
        like = next((x for x in inputs if isinstance(x, Tensor)), None)
        for x in inputs:
            if not isinstance(x, Tensor):
                x = Tensor(np.asarray(x, dtype=like.dtype.numpy if like is not None else None))
            ts.append(x)
        attrs = dict(self.attrs)
        if self.strategy is not None:
            attrs["strategy"] = self.strategy
        return _call(self.op, ts, self.nout, **attrs)

    def __repr__(self):
        return f"{type(self).__name__}(strategy={self.strategy!r})"


class MatMul(Primitive):
    def __init__(self, transpose_a=False, transpose_b=False):
        super().__init__("matmul", transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


class BatchMatMul(MatMul):
    pass


def _simple(name, op, **fixed):
    def init(self, **attrs):
        Primitive.__init__(self, op, **{**fixed, **attrs})
    return type(name, (Primitive,), {"__init__": init})


Add = _simple("Add", "add")
Sub = _simple("Sub", "sub")
Mul = _simple("Mul", "mul")
Div = _simple("Div", "div")
BiasAdd = _simple("BiasAdd", "add")
ReLU = _simple("ReLU", "relu")
GeLU = _simple("GeLU", "gelu")
Tanh = _simple("Tanh", "tanh")
Sigmoid = _simple("Sigmoid", "sigmoid")


class Softmax(Primitive):
    def __init__(self, axis=-1):
        super().__init__("softmax", axis=int(axis))


class LogSoftmax(Primitive):
    def __init__(self, axis=-1):
        super().__init__("log_softmax", axis=int(axis))


class ReduceSum(Primitive):
    def __init__(self, keep_dims=False):
        super().__init__("sum", keepdims=bool(keep_dims))
        self._keep = bool(keep_dims)

    def __call__(self, x, axis=()):
        axes = [axis] if isinstance(axis, int) else list(axis)
        a = dict(self.attrs, axes=axes) if axes else self.attrs
        if self.strategy is not None:
            a = dict(a, strategy=self.strategy)
        return _call(self.op, [x], 1, **a)


class ReduceMean(ReduceSum):
    def __init__(self, keep_dims=False):
        Primitive.__init__(self, "mean", keepdims=bool(keep_dims))


class Transpose(Primitive):
    def __init__(self):
        super().__init__("transpose")

    def __call__(self, x, perm):
        a = dict(self.attrs, perm=[int(p) for p in perm])
        if self.strategy is not None:
            a["strategy"] = self.strategy
        return _call(self.op, [x], 1, **a)


class Reshape(Primitive):
    def __init__(self):
        super().__init__("reshape")

    def __call__(self, x, shape):
        a = dict(self.attrs, shape=[int(s) for s in shape])
        if self.strategy is not None:
            a["strategy"] = self.strategy
        return _call(self.op, [x], 1, **a)


__all__ = ["Primitive", "MatMul", "BatchMatMul", "Add", "Sub", "Mul", "Div", "BiasAdd", "ReLU", "GeLU", "Tanh",
           "Sigmoid", "Softmax", "LogSoftmax", "ReduceSum", "ReduceMean", "Transpose", "Reshape"]
