"""Activation cells; get_activation maps names to them (for Dense's activation=)."""
from ...ops import raw
from ..cell import Cell


class ReLU(Cell):
    def construct(self, x):
        return raw.relu(x)


class ReLU6(Cell):
    def construct(self, x):
        return raw.clip(x, min=0.0, max=6.0)


class GELU(Cell):
    """approximate: False / 'none' (erf form) or True / 'tanh'."""

    def __init__(self, approximate=False):
        super().__init__()
        if approximate in (True, "tanh"):
            self.approximate = "tanh"
        elif approximate in (False, "none"):
            self.approximate = "none"
        else:
            raise ValueError(f"[GELU] approximate must be a bool, 'none' or 'tanh', got {approximate!r}")

    def construct(self, x):
        return raw.gelu(x, approximate=self.approximate)

    def extend_repr(self):
        return f"approximate={self.approximate}"


class Sigmoid(Cell):
    def construct(self, x):
        return raw.sigmoid(x)


class Tanh(Cell):
    def construct(self, x):
        return raw.tanh(x)


class SiLU(Cell):
    def construct(self, x):
        return raw.silu(x)


class LeakyReLU(Cell):
    """max(x, alpha * x) for 0 <= alpha <= 1 (alpha: MindSpore, default 0.2 as there; negative_slope:
    PyTorch's name, whose default is 0.01)."""

    def __init__(self, alpha=0.2, negative_slope=None):
        super().__init__()
        self.alpha = float(negative_slope if negative_slope is not None else alpha)

    def construct(self, x):
        return raw.leaky_relu(x, alpha=self.alpha)

    def extend_repr(self):
        return f"alpha={self.alpha}"


class Softmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = int(axis)

    def construct(self, x):
        return raw.softmax(x, axis=self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = int(axis)

    def construct(self, x):
        return raw.log_softmax(x, axis=self.axis)


class Softplus(Cell):
    def construct(self, x):
        return raw.softplus(x)


_BY_NAME = {
    "relu": ReLU, "relu6": ReLU6, "gelu": GELU, "sigmoid": Sigmoid, "tanh": Tanh, "silu": SiLU,
    "swish": SiLU, "leakyrelu": LeakyReLU, "leaky_relu": LeakyReLU, "softmax": Softmax,
    "logsoftmax": LogSoftmax, "log_softmax": LogSoftmax, "softplus": Softplus,
}


def get_activation(name):
    """None -> None; a Cell -> itself; a name -> a new activation cell."""
    if name is None or isinstance(name, Cell):
        return name
    if isinstance(name, str) and name.lower() in _BY_NAME:
        return _BY_NAME[name.lower()]()
    raise ValueError(f"[activation] unknown activation {name!r}; known: {sorted(_BY_NAME)}")
