"""Recurrent layers as MindSpore 2.x (and PyTorch) define them: RNN, GRU,
LSTM, and the single-step cells RNNCell, GRUCell, LSTMCell.

Each is composed of dense ops: the input projection of every time step is
one matmul over the whole sequence, then each step adds the hidden
projection and applies the gates. In GRAPH_MODE (or under spora.jit) the
time loop is unrolled into the graph, one copy of the step per time step,
so a compiled graph is specific to the sequence length.

Shapes: x (seq, batch, input) or (batch, seq, input) with batch_first;
hx (num_layers * num_directions, batch, hidden) (LSTM: a pair (h, c));
output (seq, batch, num_directions * hidden) (batch first with
batch_first). Parameters weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
bias_hh_l{k} (suffix _reverse for the backward direction), drawn from
U(-1/sqrt(hidden), 1/sqrt(hidden)). Gate order: LSTM i, f, g, o; GRU r, z, n.
"""
import math

import numpy as np

from ... import Parameter, ops
from .. import _util
from ..cell import Cell
from ..init import Uniform, initializer
from .basic import Dropout

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "GRU": 3, "LSTM": 4}


def _rnn_step(mode, x_proj, h, w_hh, b_hh):
    """One step: x_proj is x @ w_ih.T + b_ih; h a tensor, or (h, c) for LSTM."""
    if mode == "LSTM":
        h, c = h
    hh = ops.matmul(h, w_hh.T)
    if b_hh is not None:
        hh = hh + b_hh
    n = h.shape[-1]
    if mode == "RNN_TANH":
        return ops.tanh(x_proj + hh)
    if mode == "RNN_RELU":
        return ops.relu(x_proj + hh)
    if mode == "GRU":
        r = ops.sigmoid(x_proj[:, :n] + hh[:, :n])
        z = ops.sigmoid(x_proj[:, n:2 * n] + hh[:, n:2 * n])
        cand = ops.tanh(x_proj[:, 2 * n:] + r * hh[:, 2 * n:])
        return (1.0 - z) * cand + z * h
    gates = x_proj + hh
    i = ops.sigmoid(gates[:, :n])
    f = ops.sigmoid(gates[:, n:2 * n])
    g = ops.tanh(gates[:, 2 * n:3 * n])
    o = ops.sigmoid(gates[:, 3 * n:])
    c = f * c + i * g
    return o * ops.tanh(c), c


class _RNNBase(Cell):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):
        super().__init__()
        name = type(self).__name__
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"[{name}] {what} must be a positive int, got {v!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"[{name}] dropout must be in [0, 1), got {dropout}")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = int(input_size), int(hidden_size), int(num_layers)
        self.has_bias, self.batch_first, self.bidirectional = bool(has_bias), bool(batch_first), bool(bidirectional)
        self.dropout = float(dropout)
        self.num_directions = 2 if self.bidirectional else 1
        gate = _GATES[mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self._names = []
        for layer in range(self.num_layers):
            in_size = self.input_size if layer == 0 else self.hidden_size * self.num_directions
            for suffix in ([""] if not self.bidirectional else ["", "_reverse"]):
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gate, in_size), (gate, self.hidden_size)]
                if self.has_bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gate,), (gate,)]
                for n, s in zip(names, shapes):
                    setattr(self, n, Parameter(initializer(Uniform(bound), s, dtype), name=n))
                self._names.append(names)
        if self.dropout > 0 and self.num_layers > 1:
            self.dropout_layer = Dropout(p=self.dropout)

    def _weights(self, layer, direction):
        names = self._names[layer * self.num_directions + direction]
        w = [getattr(self, n) for n in names]
        return (w[0], w[1], w[2], w[3]) if self.has_bias else (w[0], w[1], None, None)

    def _direction(self, x, h0, layer, direction):
        """One layer in one direction over x (seq, batch, in): (outputs, last)."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
        seq, batch = x.shape[0], x.shape[1]
        proj = ops.matmul(x.reshape(seq * batch, x.shape[2]), w_ih.T)
        if b_ih is not None:
            proj = proj + b_ih
        proj = proj.reshape(seq, batch, proj.shape[-1])
        h = h0
        outs = [None] * seq
        steps = range(seq - 1, -1, -1) if direction == 1 else range(seq)
        for t in steps:
            h = _rnn_step(self.mode, proj[t], h, w_hh, b_hh)
            outs[t] = h[0] if self.mode == "LSTM" else h
        return ops.stack(outs, axis=0), h

    def _initial(self, x, hx):
        name = type(self).__name__
        n = self.num_layers * self.num_directions
        batch = x.shape[1]
        want = (n, batch, self.hidden_size)
        if hx is None:
            z = ops.zeros(want, dtype=x.dtype, device=x.device)
            return (z, z) if self.mode == "LSTM" else z
        parts = hx if self.mode == "LSTM" else (hx,)
        if self.mode == "LSTM" and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"[{name}] hx must be a pair (h0, c0){_util._C_location()}")
        for p in parts:
            if tuple(p.shape) != want:
                raise ValueError(f"[{name}] the initial state must be {want} (num_layers * num_directions, batch, "
                                 f"hidden_size), got {tuple(p.shape)}{_util._C_location()}")
        return tuple(parts) if self.mode == "LSTM" else hx

    def construct(self, x, hx=None, seq_length=None):
        name = type(self).__name__
        if seq_length is not None:
            raise ValueError(f"[{name}] seq_length is not supported: run each length separately, or pad the batch "
                             f"and read the output at each sequence's last step{_util._C_location()}")
        if len(x.shape) != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"[{name}] expects input ({'batch, seq' if self.batch_first else 'seq, batch'}, "
                             f"{self.input_size}), got shape {tuple(x.shape)}{_util._C_location()}")
        if self.batch_first:
            x = x.swapaxes(0, 1)
        h0 = self._initial(x, hx)
        last_h, last_c = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.num_directions):
                k = layer * self.num_directions + d
                init = (h0[0][k], h0[1][k]) if self.mode == "LSTM" else h0[k]
                out, last = self._direction(x, init, layer, d)
                outs.append(out)
                if self.mode == "LSTM":
                    last_h.append(last[0])
                    last_c.append(last[1])
                else:
                    last_h.append(last)
            x = outs[0] if len(outs) == 1 else ops.concat(outs, axis=2)
            if layer + 1 < self.num_layers and self.dropout > 0:
                x = self.dropout_layer(x)
        output = x.swapaxes(0, 1) if self.batch_first else x
        h_n = ops.stack(last_h, axis=0)
        if self.mode == "LSTM":
            return output, (h_n, ops.stack(last_c, axis=0))
        return output, h_n

    def extend_repr(self):
        return (f"input_size={self.input_size}, hidden_size={self.hidden_size}, num_layers={self.num_layers}, "
                f"has_bias={self.has_bias}, batch_first={self.batch_first}, dropout={self.dropout}, "
                f"bidirectional={self.bidirectional}")


class RNN(_RNNBase):
    """Elman RNN: h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh),
    nonlinearity 'tanh' (default) or 'relu'. construct(x, hx=None) ->
    (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", has_bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"[RNN] nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         has_bias, batch_first, dropout, bidirectional, dtype)


class GRU(_RNNBase):
    """Gated recurrent unit (gates r, z, n). construct(x, hx=None) ->
    (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, has_bias, batch_first, dropout, bidirectional,
                         dtype)


class LSTM(_RNNBase):
    """Long short-term memory (gates i, f, g, o). construct(x, hx=None) ->
    (output, (h_n, c_n)); hx is a pair (h0, c0)."""

    def __init__(self, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, has_bias, batch_first, dropout, bidirectional,
                         dtype)


class _CellBase(Cell):
    def __init__(self, mode, input_size, hidden_size, has_bias=True, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.has_bias = mode, int(input_size), int(hidden_size), \
            bool(has_bias)
        gate = _GATES[mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self.weight_ih = Parameter(initializer(Uniform(bound), (gate, self.input_size), dtype), name="weight_ih")
        self.weight_hh = Parameter(initializer(Uniform(bound), (gate, self.hidden_size), dtype), name="weight_hh")
        if self.has_bias:
            self.bias_ih = Parameter(initializer(Uniform(bound), (gate,), dtype), name="bias_ih")
            self.bias_hh = Parameter(initializer(Uniform(bound), (gate,), dtype), name="bias_hh")

    def _step(self, x, h):
        name = type(self).__name__
        if len(x.shape) != 2 or x.shape[-1] != self.input_size:
            raise ValueError(f"[{name}] expects input (batch, {self.input_size}), got shape {tuple(x.shape)}"
                             f"{_util._C_location()}")
        proj = ops.matmul(x, self.weight_ih.T)
        if self.has_bias:
            proj = proj + self.bias_ih
        return _rnn_step(self.mode, proj, h, self.weight_hh, self.bias_hh if self.has_bias else None)

    def _zeros(self, x):
        return ops.zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)


class RNNCell(_CellBase):
    """One RNN step: construct(x (batch, input), hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, has_bias=True, nonlinearity="tanh", dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"[RNNCell] nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, has_bias,
                         dtype)

    def construct(self, x, hx=None):
        return self._step(x, self._zeros(x) if hx is None else hx)


class GRUCell(_CellBase):
    """One GRU step: construct(x (batch, input), hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=None):
        super().__init__("GRU", input_size, hidden_size, has_bias, dtype)

    def construct(self, x, hx=None):
        return self._step(x, self._zeros(x) if hx is None else hx)


class LSTMCell(_CellBase):
    """One LSTM step: construct(x (batch, input), hx=None) -> (h', c');
    hx is a pair (h, c)."""

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, has_bias, dtype)

    def construct(self, x, hx=None):
        if hx is None:
            z = self._zeros(x)
            hx = (z, z)
        return self._step(x, tuple(hx))
