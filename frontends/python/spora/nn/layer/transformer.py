"""MultiheadAttention and TransformerEncoderLayer (PyTorch's semantics and
parameter layout, so weights and numbers can be compared one to one)."""
import math

import numpy as np

from ... import Parameter, ops
from ...ops import raw
from .. import _util
from ..cell import Cell
from ..init import XavierUniform, initializer
from .activation import get_activation
from .basic import Dense, Dropout
from .normalization import LayerNorm


class MultiheadAttention(Cell):
    """Scaled dot-product attention over num_heads heads.

    construct(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True) -> (output, weights or None).
    Layout (L, N, E) unless batch_first (N, L, E). attn_mask: (L, S) or
    (N * num_heads, L, S), bool (True = may not attend) or float (added to
    the scores). key_padding_mask: (N, S), bool (True = padding, ignored) or
    float (added). Parameters: in_proj_weight (3E, E) Xavier-uniform,
    in_proj_bias (3E,) zero, out_proj (Dense E -> E, bias zero).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, has_bias=True, batch_first=False, dtype=None):
        super().__init__()
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        if self.num_heads <= 0 or self.embed_dim % self.num_heads:
            raise ValueError(f"[MultiheadAttention] embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
        self.head_dim = self.embed_dim // self.num_heads
        self.batch_first = batch_first
        self.has_bias = has_bias
        e = self.embed_dim
        self.in_proj_weight = Parameter(initializer(XavierUniform(), (3 * e, e), dtype))
        if has_bias:
            self.in_proj_bias = Parameter(initializer("zeros", (3 * e,), dtype))
        self.out_proj = Dense(e, e, has_bias=has_bias, dtype=dtype)
        if has_bias:
            self.out_proj.bias.set_data(initializer("zeros", (e,), dtype))
        self.dropout = Dropout(p=dropout)

    def _project(self, x, i):
        e = self.embed_dim
        w = raw.slice(self.in_proj_weight, starts=[i * e], ends=[(i + 1) * e], axes=[0])
        b = raw.slice(self.in_proj_bias, starts=[i * e], ends=[(i + 1) * e], axes=[0]) if self.has_bias else None
        return ops.linear(x, w, b)

    def _heads(self, x, n, length):
        # (N, L, E) -> (N, H, L, D)
        return raw.transpose(x.reshape((n, length, self.num_heads, self.head_dim)), perm=[0, 2, 1, 3])

    def _check(self, name, x):
        if len(x.shape) != 3 or x.shape[2] != self.embed_dim:
            layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(f"[MultiheadAttention] {name} must be {layout} with E = {self.embed_dim}, got shape "
                             f"{tuple(x.shape)}{_util._C_location()}")

    def construct(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                  average_attn_weights=True):
        for name, x in (("query", query), ("key", key), ("value", value)):
            self._check(name, x)
        if not self.batch_first:
            query, key, value = (raw.transpose(t, perm=[1, 0, 2]) for t in (query, key, value))
        n, lq = query.shape[0], query.shape[1]
        s = key.shape[1]
        if key.shape[0] != n or value.shape[0] != n or value.shape[1] != s:
            raise ValueError(f"[MultiheadAttention] batch or source lengths differ: query {tuple(query.shape)}, "
                             f"key {tuple(key.shape)}, value {tuple(value.shape)}{_util._C_location()}")
        q = self._heads(self._project(query, 0), n, lq)
        k = self._heads(self._project(key, 1), n, s)
        v = self._heads(self._project(value, 2), n, s)
        scores = ops.matmul(q, raw.transpose(k, perm=[0, 1, 3, 2])) * (1.0 / math.sqrt(self.head_dim))
        if attn_mask is not None:
            if tuple(attn_mask.shape) == (lq, s):
                m = attn_mask.reshape((1, 1, lq, s))
            elif tuple(attn_mask.shape) == (n * self.num_heads, lq, s):
                m = attn_mask.reshape((n, self.num_heads, lq, s))
            else:
                raise ValueError(f"[MultiheadAttention] attn_mask must be ({lq}, {s}) or "
                                 f"({n * self.num_heads}, {lq}, {s}), got {tuple(attn_mask.shape)}"
                                 f"{_util._C_location()}")
            scores = _apply_mask(scores, m)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, s):
                raise ValueError(f"[MultiheadAttention] key_padding_mask must be ({n}, {s}), got "
                                 f"{tuple(key_padding_mask.shape)}{_util._C_location()}")
            scores = _apply_mask(scores, key_padding_mask.reshape((n, 1, 1, s)))
        weights = raw.softmax(scores, axis=-1)
        out = ops.matmul(self.dropout(weights), v)                       # (N, H, L, D)
        out = raw.transpose(out, perm=[0, 2, 1, 3]).reshape((n, lq, self.embed_dim))
        out = self.out_proj(out)
        if not self.batch_first:
            out = raw.transpose(out, perm=[1, 0, 2])
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = raw.mean(weights, axes=[1])
        return out, weights

    def extend_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _apply_mask(scores, mask):
    if mask.dtype.name == "bool":
        return ops.where(mask, ops.full((), -np.inf, scores.dtype), scores)
    return scores + mask.astype(scores.dtype)


class TransformerEncoderLayer(Cell):
    """Self-attention then a feed-forward block, each with dropout, a residual
    connection and LayerNorm (after each block, or before with norm_first).

    construct(src, src_mask=None, src_key_padding_mask=None).
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, dtype=dtype)
        self.linear1 = Dense(d_model, dim_feedforward, dtype=dtype)
        self.dropout = Dropout(p=dropout)
        self.linear2 = Dense(dim_feedforward, d_model, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm((d_model,), eps=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm((d_model,), eps=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(p=dropout)
        self.dropout2 = Dropout(p=dropout)
        self.activation = get_activation(activation)

    def _sa(self, x, mask, padding):
        return self.dropout1(self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False,
                                            attn_mask=mask)[0])

    def _ff(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def construct(self, src, src_mask=None, src_key_padding_mask=None):
        x = src
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, src_key_padding_mask)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, src_mask, src_key_padding_mask))
            x = self.norm2(x + self._ff(x))
        return x
