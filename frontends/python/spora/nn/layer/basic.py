"""Dense, Flatten, Identity, Dropout, Embedding."""
import math

import numpy as np

from ... import Parameter, Tensor, _C, float32, ops
from ...ops import raw
from .. import _util
from .. import init as _init
from ..cell import Cell
from ..init import HeUniform, Initializer, Normal, Uniform, initializer
from .activation import get_activation


def _check_in_features(op, x, n, what):
    if len(x.shape) < 1 or x.shape[-1] != n:
        raise ValueError(f"[{op}] expects input with last dimension {n} ({what}), got shape "
                         f"{tuple(x.shape)}{_util._C_location()}")


class Dense(Cell):
    """y = activation(x @ weight.T + bias); weight (out_channels, in_channels).

    Default init as in PyTorch's Linear (and MindSpore's Dense): weight
    HeUniform(sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)); bias the same bound.
    activation: None, a name ('relu', 'gelu', ...) or a Cell; 'relu' and
    friends fuse with the matmul at graph optimisation.
    """

    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True,
                 activation=None, dtype=None):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        if self.in_channels <= 0 or self.out_channels <= 0:
            raise ValueError(f"[Dense] channels must be positive, got ({in_channels}, {out_channels})")
        self.weight = Parameter(initializer(weight_init if weight_init is not None else HeUniform(math.sqrt(5)),
                                            (self.out_channels, self.in_channels), dtype))
        self.has_bias = has_bias
        if has_bias:
            bound = 1.0 / math.sqrt(self.in_channels)
            self.bias = Parameter(initializer(bias_init if bias_init is not None else Uniform(bound),
                                              (self.out_channels,), dtype))
        self.activation = get_activation(activation)

    def construct(self, x):
        _check_in_features("Dense", x, self.in_channels, "in_channels")
        y = ops.linear(x, self.weight, self.bias if self.has_bias else None)
        return self.activation(y) if self.activation is not None else y

    def extend_repr(self):
        s = f"input_channels={self.in_channels}, output_channels={self.out_channels}, has_bias={self.has_bias}"
        if self.activation is not None:
            s += f", activation={type(self.activation).__name__}"
        return s


class Flatten(Cell):
    """Flattens dims start_dim..end_dim (default: all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def construct(self, x):
        nd = len(x.shape)
        s = self.start_dim + nd if self.start_dim < 0 else self.start_dim
        e = self.end_dim + nd if self.end_dim < 0 else self.end_dim
        if not 0 <= s <= e < max(nd, 1):
            raise ValueError(f"[Flatten] dims {self.start_dim}..{self.end_dim} out of range for shape "
                             f"{tuple(x.shape)}{_util._C_location()}")
        shape = tuple(x.shape[:s]) + (int(np.prod(x.shape[s:e + 1], dtype=np.int64)),) + tuple(x.shape[e + 1:])
        if s >= 1 and all(d > 0 for d in shape[1:]):
            # The batch dim is inferred (-1), so that a traced or exported
            # graph takes other batch sizes.
            shape = (-1,) + shape[1:]
        return x.reshape(shape)


class Identity(Cell):
    def construct(self, x):
        return x


class Dropout(Cell):
    """Zeroes each element with probability p in training (scaling the rest by
    1/(1-p)); the identity in eval mode. Give keep_prob (MindSpore) or p
    (PyTorch), not both.

    Randomness: each call uses a new offset of the Philox stream keyed by a
    seed drawn at construction (spora.nn.init.set_seed makes runs
    reproducible; under spora.nn.utils.no_init_parameters, by
    init_parameters_data). In GRAPH_MODE the random numbers are drawn on the host
    before each compiled run (Cell.__call__ and Model do it) and enter the
    graph as a weight, because a random op inside a graph has a constant
    seed. A network traced by a user's own spora.jit therefore reuses one
    mask; use Model or Cell.__call__ in GRAPH_MODE for dropout in graphs.
    """

    def __init__(self, keep_prob=None, p=None, dtype=None):
        super().__init__()
        if keep_prob is not None and p is not None:
            raise ValueError("[Dropout] give keep_prob or p, not both")
        if p is None:
            p = 0.5 if keep_prob is None else 1.0 - float(keep_prob)
        p = float(p)
        if not 0.0 <= p < 1.0:
            raise ValueError(f"[Dropout] p must be in [0, 1), got {p}")
        self.p = p
        if _init._deferred[0]:
            # Under no_init_parameters the seed is drawn by
            # init_parameters_data, in declaration order, so the generator
            # gives the Parameters declared after it eager's values.
            self.seed = None
            self.__dict__["_deferred_draws"] = [(_C._declare(), self._draw_seed)]
        else:
            self.seed = _util.next_seed()
        self._calls = 0
        self._noise = {}  # input shape -> Parameter of uniform numbers (graph mode)

    def construct(self, x):
        if not self.training or self.p == 0.0:
            return x
        if _util.is_jit_tracing():
            shape = tuple(x.shape)
            noise = self._noise.get(shape)
            if noise is None or (noise._meta and not _init._deferred[0]):  # new, or declared by a plan
                # Declared only while planning (spora.parallel.plan): the
                # noise is as large as the activation.
                value = Tensor(shape=shape, dtype=float32) if _init._deferred[0] else self._draw(shape)
                noise = Parameter(value, name=f"dropout_noise_{id(self)}_{len(self._noise)}", requires_grad=False)
                self._noise[shape] = noise
            scale = (noise >= self.p).astype(x.dtype) * (1.0 / (1.0 - self.p))
            return x * scale
        seed = self._seed()
        self._calls += 1
        return raw.dropout(x, p=self.p, training=True, seed=seed, offset=self._calls)[0]

    def _seed(self):
        if self.seed is None:
            raise RuntimeError("[Dropout] declared under spora.nn.utils.no_init_parameters: its seed is drawn by "
                               f"net.init_parameters_data(); call that first{_util._C_location()}")
        return self.seed

    def _draw_seed(self):
        self.seed = _util.next_seed()
        self.__dict__.pop("_deferred_draws", None)

    def _draw(self, shape):
        seed = self._seed()
        self._calls += 1
        return raw.uniform(shape=list(shape), seed=seed, offset=self._calls)

    def _before_graph_run(self):
        if self.training and self.p > 0.0:
            for shape, noise in self._noise.items():
                noise.set_data(self._draw(shape))

    def extend_repr(self):
        return f"p={self.p}"


class _ZeroRow(Initializer):
    """`base`'s values with row `row` zero (a declared padded Embedding)."""

    def __init__(self, base, row):
        self.base, self.row = base, row

    def __call__(self, shape):
        v = np.array(self.base(shape)) if isinstance(self.base, Initializer) else np.full(shape, float(self.base))
        v[self.row] = 0
        return v


class Embedding(Cell):
    """Lookup table: ids (any int shape) -> ids.shape + (embedding_size,).

    Default init N(0, 1) as in PyTorch. padding_idx: that row starts at zero
    and receives no gradient. An id outside [-vocab_size, vocab_size) gives a
    zero row (the kernel checks every index, see ops/indexing).
    """

    def __init__(self, vocab_size, embedding_size, embedding_table=None, padding_idx=None, dtype=None):
        super().__init__()
        self.vocab_size, self.embedding_size = int(vocab_size), int(embedding_size)
        table = initializer(embedding_table if embedding_table is not None else Normal(1.0),
                            (self.vocab_size, self.embedding_size), dtype)
        self.padding_idx = padding_idx
        if padding_idx is not None:
            if not -self.vocab_size <= padding_idx < self.vocab_size:
                raise ValueError(f"[Embedding] padding_idx {padding_idx} out of range for vocab_size {vocab_size}")
            self.padding_idx = padding_idx % self.vocab_size
            if table._meta:  # declared (no_init_parameters): the row is zeroed when drawn
                table = Tensor(shape=table.shape, dtype=table.dtype,
                               init=_ZeroRow(table._lazy_init[0], self.padding_idx))
            else:
                t = table.asnumpy()
                t[self.padding_idx] = 0
                table = Tensor(t)
            mask = np.ones((self.vocab_size, 1), np.float32)
            mask[self.padding_idx] = 0
            self._row_mask = Tensor(mask.astype(_util.np_dtype(table.dtype)))
        self.embedding_table = Parameter(table)

    def construct(self, ids):
        if ids.dtype.name not in ("int32", "int64"):
            raise TypeError(f"[Embedding] ids must be int32 or int64, got {ids.dtype.name}"
                            f"{_util._C_location()}")
        table = self.embedding_table
        if self.padding_idx is not None:
            # Gradient to the padding row is cut by the mask; its value stays 0.
            table = table * self._row_mask
        return raw.embedding(table, ids)

    def extend_repr(self):
        return f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}"
