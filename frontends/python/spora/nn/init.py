"""Parameter initializers (MindSpore's spora.common.initializer names).

initializer(init, shape, dtype) returns a Tensor. `init` is an Initializer,
its name ('normal', 'uniform', 'zeros', 'ones', 'xavier_uniform',
'he_uniform', 'he_normal', 'truncated_normal'), a number (constant) or an
array/Tensor of the right shape. Values are drawn on the host from one seeded
numpy generator (set_seed), so a network's initial weights are reproducible
and independent of the device and thread count.
"""
import math

import numpy as np

from .. import Tensor
from . import _util


def set_seed(seed):
    """Seed the generator every initializer draws from."""
    _util.set_seed(seed)


def _fans(shape):
    """(fan_in, fan_out) as PyTorch computes them: dense (out, in); conv
    (out, in, *kernel) times the receptive field."""
    if len(shape) < 2:
        raise ValueError(f"[initializer] fan in/out needs a shape of rank >= 2, got {tuple(shape)}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _gain(nonlinearity, param=None):
    if nonlinearity in ("linear", "sigmoid", "conv2d", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope * slope))
    raise ValueError(f"[initializer] unknown nonlinearity {nonlinearity!r}")


class Initializer:
    """Base class: __call__(shape) -> float64 numpy array of that shape.

    A subclass overrides __call__, or -- as MindSpore's initializers do --
    _initialize(arr), which fills a zeroed float64 array of the shape in
    place."""

    def __call__(self, shape):
        if type(self)._initialize is Initializer._initialize:
            raise NotImplementedError(f"[initializer] {type(self).__name__} defines neither __call__(shape) nor "
                                      f"_initialize(arr)")
        arr = np.zeros(shape)
        self._initialize(arr)
        return arr

    def _initialize(self, arr):
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Zero(Initializer):
    def __call__(self, shape):
        return np.zeros(shape)


class One(Initializer):
    def __call__(self, shape):
        return np.ones(shape)


class Constant(Initializer):
    def __init__(self, value):
        self.value = float(value)

    def __call__(self, shape):
        return np.full(shape, self.value)


class Normal(Initializer):
    """N(mean, sigma^2)."""

    def __init__(self, sigma=0.01, mean=0.0):
        self.sigma, self.mean = float(sigma), float(mean)

    def __call__(self, shape):
        return _util.rng().normal(self.mean, self.sigma, size=shape)


class Uniform(Initializer):
    """U(-scale, scale)."""

    def __init__(self, scale=0.07):
        self.scale = float(scale)

    def __call__(self, shape):
        return _util.rng().uniform(-self.scale, self.scale, size=shape)


class TruncatedNormal(Initializer):
    """N(mean, sigma^2) cut to [mean + a*sigma, mean + b*sigma] (redrawn outside)."""

    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        if not a < b:
            raise ValueError(f"[initializer] TruncatedNormal needs a < b, got a={a}, b={b}")
        self.sigma, self.mean, self.a, self.b = float(sigma), float(mean), float(a), float(b)

    def __call__(self, shape):
        g = _util.rng()
        z = g.standard_normal(size=shape)
        bad = (z < self.a) | (z > self.b)
        while bad.any():
            z[bad] = g.standard_normal(size=int(bad.sum()))
            bad = (z < self.a) | (z > self.b)
        return self.mean + self.sigma * z


class XavierUniform(Initializer):
    """U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""

    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def __call__(self, shape):
        fan_in, fan_out = _fans(shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return _util.rng().uniform(-bound, bound, size=shape)


class XavierNormal(Initializer):
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def __call__(self, shape):
        fan_in, fan_out = _fans(shape)
        return _util.rng().normal(0.0, self.gain * math.sqrt(2.0 / (fan_in + fan_out)), size=shape)


class _He(Initializer):
    def __init__(self, negative_slope=0.0, mode="fan_in", nonlinearity="leaky_relu"):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError(f"[initializer] mode must be 'fan_in' or 'fan_out', got {mode!r}")
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _std(self, shape):
        fan_in, fan_out = _fans(shape)
        fan = fan_in if self.mode == "fan_in" else fan_out
        return _gain(self.nonlinearity, self.negative_slope) / math.sqrt(fan)


class HeUniform(_He):
    """Kaiming uniform: U(-b, b), b = gain * sqrt(3 / fan). With
    negative_slope=sqrt(5) this is PyTorch's default for Linear and Conv."""

    def __call__(self, shape):
        bound = math.sqrt(3.0) * self._std(shape)
        return _util.rng().uniform(-bound, bound, size=shape)


class HeNormal(_He):
    """Kaiming normal: N(0, (gain / sqrt(fan))^2)."""

    def __call__(self, shape):
        return _util.rng().normal(0.0, self._std(shape), size=shape)


class Identity(Initializer):
    """The identity matrix (2-d shapes only; a non-square shape gets ones on
    its main diagonal)."""

    def __call__(self, shape):
        if len(shape) != 2:
            raise ValueError(f"[initializer] Identity needs a 2-d shape, got {tuple(shape)}")
        return np.eye(shape[0], shape[1])


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times gain: the shape seen as (shape[0],
    product of the rest), from the QR decomposition of a standard normal
    matrix (signs fixed by R's diagonal, so the draw is uniform)."""

    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def __call__(self, shape):
        if len(shape) < 2:
            raise ValueError(f"[initializer] Orthogonal needs a shape of rank >= 2, got {tuple(shape)}")
        rows, cols = shape[0], int(np.prod(shape[1:]))
        a = _util.rng().standard_normal((max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return (self.gain * q).reshape(shape)


class VarianceScaling(Initializer):
    """Scale-aware draws: variance scale / n, n the fan_in, fan_out or their
    mean (mode 'fan_avg'); distribution 'truncated_normal' (cut at two
    standard deviations, widened so the variance is still scale / n),
    'untruncated_normal' or 'uniform'."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal"):
        if scale <= 0:
            raise ValueError(f"[initializer] VarianceScaling needs scale > 0, got {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"[initializer] mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(f"[initializer] distribution must be 'truncated_normal', 'untruncated_normal' or "
                             f"'uniform', got {distribution!r}")
        self.scale, self.mode, self.distribution = float(scale), mode, distribution

    def __call__(self, shape):
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        var = self.scale / max(1.0, n)
        if self.distribution == "uniform":
            bound = math.sqrt(3.0 * var)
            return _util.rng().uniform(-bound, bound, size=shape)
        if self.distribution == "untruncated_normal":
            return _util.rng().normal(0.0, math.sqrt(var), size=shape)
        # The standard deviation of N(0, 1) cut to [-2, 2] is 0.8796...
        return TruncatedNormal(sigma=math.sqrt(var) / 0.87962566103423978)(shape)


class Sparse(Initializer):
    """A 2-d matrix whose columns each have ceil(sparsity * rows) zeros (at
    random rows), the other entries N(0, sigma^2)."""

    def __init__(self, sparsity, sigma=0.01):
        if not 0.0 <= sparsity <= 1.0:
            raise ValueError(f"[initializer] Sparse needs sparsity in [0, 1], got {sparsity}")
        self.sparsity, self.sigma = float(sparsity), float(sigma)

    def __call__(self, shape):
        if len(shape) != 2:
            raise ValueError(f"[initializer] Sparse needs a 2-d shape, got {tuple(shape)}")
        rows, cols = shape
        g = _util.rng()
        out = g.normal(0.0, self.sigma, size=shape)
        zeros = int(math.ceil(self.sparsity * rows))
        for c in range(cols):
            out[g.permutation(rows)[:zeros], c] = 0.0
        return out


class Dirac(Initializer):
    """Convolution weights (out, in, k...) that pass channels through: in
    each of `groups` groups, output channel d of the group takes input
    channel d at the kernel's centre (as many as both counts allow)."""

    def __init__(self, groups=1):
        self.groups = int(groups)

    def __call__(self, shape):
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"[initializer] Dirac needs a 3-, 4- or 5-d shape, got {tuple(shape)}")
        if self.groups < 1 or shape[0] % self.groups:
            raise ValueError(f"[initializer] Dirac: output channels {shape[0]} must be divisible by groups "
                             f"{self.groups}")
        out = np.zeros(shape)
        per_group = shape[0] // self.groups
        centre = tuple(k // 2 for k in shape[2:])
        for g in range(self.groups):
            for d in range(min(per_group, shape[1])):
                out[(g * per_group + d, d) + centre] = 1.0
        return out


_BY_NAME = {
    "zeros": Zero, "zero": Zero, "ones": One, "one": One,
    "normal": Normal, "uniform": Uniform,
    "truncated_normal": TruncatedNormal, "truncatednormal": TruncatedNormal,
    "xavier_uniform": XavierUniform, "xavieruniform": XavierUniform,
    "xavier_normal": XavierNormal, "xaviernormal": XavierNormal,
    "he_uniform": HeUniform, "heuniform": HeUniform,
    "he_normal": HeNormal, "henormal": HeNormal,
    "identity": Identity, "eye": Identity, "orthogonal": Orthogonal,
    "variance_scaling": VarianceScaling, "variancescaling": VarianceScaling,
}


# Set inside spora.nn.utils.no_init_parameters: initializer() then declares
# tensors without data (drawn later by init_data, in declaration order).
_deferred = [0]


def initializer(init, shape, dtype=None):
    """A Tensor of `shape` and `dtype` (default float32) filled by `init`.
    Inside spora.nn.utils.no_init_parameters an Initializer, name or number
    gives a Tensor without data instead (Tensor(shape=, dtype=, init=)):
    nothing is drawn or allocated until init_data()."""
    from .. import float32
    dtype = float32 if dtype is None else dtype
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if any(s < 0 for s in shape):
        raise ValueError(f"[initializer] negative dimension in shape {shape}")
    init = _resolve(init)
    if _deferred[0] and (isinstance(init, Initializer) or _is_number(init)):
        return Tensor(shape=shape, dtype=dtype, init=init)
    return draw(init, shape, dtype)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _resolve(init):
    if isinstance(init, str):
        key = init.lower()
        if key not in _BY_NAME:
            raise ValueError(f"[initializer] unknown initializer {init!r}; known: {sorted(set(_BY_NAME))}")
        return _BY_NAME[key]()
    return init


def draw(init, shape, dtype):
    """The values of `init` (an Initializer, name, number or array) for
    `shape` as a Tensor of `dtype`, drawn now (also what init_data calls)."""
    init = _resolve(init)
    if isinstance(init, Initializer):
        values = init(shape)
    elif _is_number(init):
        values = np.full(shape, float(init))
    else:
        values = init.asnumpy() if hasattr(init, "asnumpy") else np.asarray(init)
        if values.shape != shape:
            raise ValueError(f"[initializer] value of shape {values.shape} given for shape {shape}")
    return Tensor(np.asarray(values, dtype=_util.np_dtype(dtype)))
