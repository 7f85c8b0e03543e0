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


# -- more of MindSpore's primitives ------------------------------------------------
# Element-wise ones run their registry op (and take a strategy like those above).

Exp = _simple("Exp", "exp")
Log = _simple("Log", "log")
Sqrt = _simple("Sqrt", "sqrt")
Rsqrt = _simple("Rsqrt", "rsqrt")
Square = _simple("Square", "square")
Abs = _simple("Abs", "abs")
Neg = _simple("Neg", "neg")
Reciprocal = _simple("Reciprocal", "reciprocal")
Floor = _simple("Floor", "floor")
Erf = _simple("Erf", "erf")
Sin = _simple("Sin", "sin")
Cos = _simple("Cos", "cos")
Sign = _simple("Sign", "sign")
Softplus = _simple("Softplus", "softplus")
Maximum = _simple("Maximum", "maximum")
Minimum = _simple("Minimum", "minimum")
Pow = _simple("Pow", "pow")
Equal = _simple("Equal", "equal")
NotEqual = _simple("NotEqual", "not_equal")
Greater = _simple("Greater", "greater")
GreaterEqual = _simple("GreaterEqual", "greater_equal")
Less = _simple("Less", "less")
LessEqual = _simple("LessEqual", "less_equal")
LogicalAnd = _simple("LogicalAnd", "logical_and")
LogicalOr = _simple("LogicalOr", "logical_or")
LogicalNot = _simple("LogicalNot", "logical_not")


class ReduceMax(ReduceSum):
    def __init__(self, keep_dims=False):
        Primitive.__init__(self, "max", keepdims=bool(keep_dims))


class ReduceMin(ReduceSum):
    def __init__(self, keep_dims=False):
        Primitive.__init__(self, "min", keepdims=bool(keep_dims))


class ReduceProd(ReduceSum):
    def __init__(self, keep_dims=False):
        Primitive.__init__(self, "prod", keepdims=bool(keep_dims))


class _Composite:
    """A MindSpore primitive whose call is a spora.ops function (no
    sharding strategy of its own)."""

    def __repr__(self):
        return f"{type(self).__name__}()"


class Cast(_Composite):
    def __call__(self, input_x, type):
        return input_x.astype(type)


class Shape(_Composite):
    def __call__(self, input_x):
        return tuple(input_x.shape)


class Size(_Composite):
    def __call__(self, input_x):
        return int(input_x.size)


class Concat(_Composite):
    def __init__(self, axis=0):
        self.axis = int(axis)

    def __call__(self, input_x):
        from . import ops
        return ops.concat(tuple(input_x), axis=self.axis)


class Stack(_Composite):
    def __init__(self, axis=0):
        self.axis = int(axis)

    def __call__(self, input_x):
        from . import ops
        return ops.stack(list(input_x), axis=self.axis)


class ExpandDims(_Composite):
    def __call__(self, input_x, axis):
        return input_x.expand_dims(int(axis))


class Squeeze(_Composite):
    def __init__(self, axis=()):
        self.axis = (int(axis),) if isinstance(axis, (int, np.integer)) else tuple(int(a) for a in axis)

    def __call__(self, input_x):
        if self.axis:
            for a in self.axis:
                if input_x.shape[a] != 1:
                    raise ValueError(f"[Squeeze] axis {a} of shape {tuple(input_x.shape)} is not 1")
        return input_x.squeeze(self.axis if self.axis else None)


class OneHot(_Composite):
    """OneHot(axis=-1)(indices, depth, on_value, off_value): the one-hot
    axis last (axis=-1), as MindSpore's default."""

    def __init__(self, axis=-1):
        if int(axis) != -1:
            raise ValueError(f"[OneHot] only axis=-1 is supported, got {axis}; move the axis with "
                             f"transpose afterwards")
        self.axis = -1

    def __call__(self, indices, depth, on_value, off_value):
        on = on_value.item() if isinstance(on_value, Tensor) else on_value
        off = off_value.item() if isinstance(off_value, Tensor) else off_value
        from . import float32, ops
        dt = on_value.dtype if isinstance(on_value, Tensor) else float32
        return ops.one_hot(indices, int(depth), on_value=float(on), off_value=float(off), dtype=dt)


class Argmax(_Composite):
    """Argmax(axis=-1, output_type=int32)(x): int32 indices, as MindSpore."""

    def __init__(self, axis=-1, output_type=None):
        self.axis, self.output_type = int(axis), output_type

    def __call__(self, input_x):
        from . import int32
        return input_x.argmax(self.axis).astype(self.output_type or int32)


class Argmin(Argmax):
    def __call__(self, input_x):
        from . import int32
        return input_x.argmin(self.axis).astype(self.output_type or int32)


class ZerosLike(_Composite):
    def __call__(self, input_x):
        from . import ops
        return ops.zeros_like(input_x)


class OnesLike(_Composite):
    def __call__(self, input_x):
        from . import ops
        return ops.ones_like(input_x)


class Fill(_Composite):
    def __call__(self, type, shape, value):
        from . import ops
        return ops.full(tuple(shape), value, dtype=type)


class Zeros(_Composite):
    def __call__(self, shape, type):
        from . import ops
        return ops.zeros(shape, dtype=type)


class Ones(_Composite):
    def __call__(self, shape, type):
        from . import ops
        return ops.ones(shape, dtype=type)


class Gather(_Composite):
    def __call__(self, input_params, input_indices, axis):
        from . import ops
        return ops.gather(input_params, input_indices, axis=int(axis))


class Select(_Composite):
    def __call__(self, cond, x, y):
        from . import ops
        return ops.where(cond, x, y)


MORE = ["Exp", "Log", "Sqrt", "Rsqrt", "Square", "Abs", "Neg", "Reciprocal", "Floor", "Erf", "Sin", "Cos", "Sign",
        "Softplus", "Maximum", "Minimum", "Pow", "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual",
        "LogicalAnd", "LogicalOr", "LogicalNot", "ReduceMax", "ReduceMin", "ReduceProd", "Cast", "Shape", "Size",
        "Concat", "Stack", "ExpandDims", "Squeeze", "OneHot", "Argmax", "Argmin", "ZerosLike", "OnesLike", "Fill",
        "Zeros", "Ones", "Gather", "Select"]
__all__ += MORE
