"""spora.nn layers: forward vs numpy references, gradients vs finite differences."""
import math

import numpy as np
import pytest

import spora
from spora import nn
from nn_testutil import check_grads, np_

F64 = spora.float64


@pytest.fixture(autouse=True)
def _pynative():
    spora.set_context(mode=spora.PYNATIVE_MODE)
    nn.init.set_seed(1)
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE)


def rnd(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- numpy references -------------------------------------------------------------

def conv2d_ref(x, w, b, stride, pads, dilation=(1, 1), groups=1):
    t, bo, l, r = pads
    x = np.pad(x, ((0, 0), (0, 0), (t, bo), (l, r)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    dh, dw = dilation
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        y += b[None, :, None, None]
    return y


def pool_ref(x, k, s, pads, kind, count_include_pad=True):
    t, bo, l, r = pads
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (t, bo), (l, r)), constant_values=fill)
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (t, bo), (l, r)))
    n, c, h, w = xp.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
            if kind == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = k[0] * k[1] if count_include_pad else \
                    ones[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]].sum(axis=(2, 3))
                y[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return y


def same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


# -- Dense, Flatten, Embedding ---------------------------------------------------------

def test_dense_forward_and_default_init():
    d = nn.Dense(5, 3, dtype=F64)
    w, b = np_(d.weight), np_(d.bias)
    assert w.shape == (3, 5) and b.shape == (3,)
    bound = 1 / math.sqrt(5)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    x = rnd(4, 5)
    np.testing.assert_allclose(np_(d(spora.Tensor(x))), x @ w.T + b, rtol=1e-12)


def test_dense_activation_and_no_bias_and_3d_input():
    d = nn.Dense(4, 6, has_bias=False, activation="relu", dtype=F64)
    x = rnd(2, 3, 4, seed=2)
    np.testing.assert_allclose(np_(d(spora.Tensor(x))), np.maximum(x @ np_(d.weight).T, 0), rtol=1e-12)
    assert [n for n, _ in d.parameters_and_names()] == ["weight"]


def test_dense_grads():
    d = nn.Dense(4, 3, activation="tanh", dtype=F64)
    check_grads(d, [spora.Tensor(rnd(5, 4, seed=3))])


def test_flatten():
    x = rnd(2, 3, 4, 5)
    np.testing.assert_array_equal(np_(nn.Flatten()(spora.Tensor(x))), x.reshape(2, -1))
    np.testing.assert_array_equal(np_(nn.Flatten(0, 1)(spora.Tensor(x))), x.reshape(6, 4, 5))


def test_embedding_forward_grad_and_padding_idx():
    e = nn.Embedding(7, 3, padding_idx=2, dtype=F64)
    table = np_(e.embedding_table)
    assert np.all(table[2] == 0)
    ids = np.array([[0, 2, 6], [2, 1, 1]], np.int32)
    np.testing.assert_array_equal(np_(e(spora.Tensor(ids))), table[ids])

    def f():
        return (e(spora.Tensor(ids)) * spora.Tensor(rnd(2, 3, 3, seed=4))).sum()
    _, (g,) = spora.value_and_grad(f, grad_position=None, weights=[e.embedding_table])()
    g = np_(g)
    probe = rnd(2, 3, 3, seed=4)
    want = np.zeros((7, 3))
    np.add.at(want, ids, probe)
    want[2] = 0  # the padding row gets no gradient
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_embedding_rejects_float_ids():
    e = nn.Embedding(4, 2)
    with pytest.raises(TypeError, match=r"\[Embedding\] ids must be int32 or int64.*test_nn_layers.py:\d+"):
        e(spora.Tensor(np.zeros(3, np.float32)))


# -- Conv2d and pooling ---------------------------------------------------------------

@pytest.mark.parametrize("pad_mode,padding,stride", [("valid", 0, 1), ("same", 0, 1), ("same", 0, 2),
                                                     ("pad", 1, 1), ("pad", (0, 1, 2, 1), 2)])
def test_conv2d_forward(pad_mode, padding, stride):
    c = nn.Conv2d(3, 4, 3, stride=stride, pad_mode=pad_mode, padding=padding, has_bias=True, dtype=F64)
    x = rnd(2, 3, 7, 6, seed=5)
    w, b = np_(c.weight), np_(c.bias)
    if pad_mode == "valid":
        pads = (0, 0, 0, 0)
    elif pad_mode == "same":
        pads = same_pads(7, 3, stride) + same_pads(6, 3, stride)
    else:
        p = padding
        pads = (p, p, p, p) if isinstance(p, int) else p
    want = conv2d_ref(x, w, b, (stride, stride), pads)
    got = np_(c(spora.Tensor(x)))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_conv2d_groups_dilation_and_default_no_bias():
    c = nn.Conv2d(4, 6, (3, 2), pad_mode="valid", dilation=2, group=2, dtype=F64)
    assert not c.has_bias and np_(c.weight).shape == (6, 2, 3, 2)
    x = rnd(1, 4, 9, 8, seed=6)
    want = conv2d_ref(x, np_(c.weight), None, (1, 1), (0, 0, 0, 0), (2, 2), 2)
    np.testing.assert_allclose(np_(c(spora.Tensor(x))), want, rtol=1e-10, atol=1e-12)


def test_conv2d_grads():
    c = nn.Conv2d(2, 3, 3, stride=2, pad_mode="same", has_bias=True, dtype=F64)
    check_grads(c, [spora.Tensor(rnd(2, 2, 5, 5, seed=7))])


def test_conv2d_wrong_channels_names_the_line():
    c = nn.Conv2d(3, 4, 3)
    with pytest.raises(ValueError, match=r"\[Conv2d\] expects input \(N, 3, H, W\), got shape \(1, 2, 5, 5\) "
                                         r"\(.*test_nn_layers.py:\d+\)"):
        c(spora.Tensor(np.zeros((1, 2, 5, 5), np.float32)))


@pytest.mark.parametrize("cls,kind", [(nn.MaxPool2d, "max"), (nn.AvgPool2d, "avg")])
@pytest.mark.parametrize("k,s,mode", [(2, None, "valid"), (3, 2, "valid"), (3, 2, "same"), (2, 2, "same")])
def test_pool_forward(cls, kind, k, s, mode):
    x = rnd(2, 3, 7, 6, seed=8)
    p = cls(kernel_size=k, stride=s, pad_mode=mode)
    stride = s or k
    pads = (0, 0, 0, 0) if mode == "valid" else same_pads(7, k, stride) + same_pads(6, k, stride)
    want = pool_ref(x, (k, k), (stride, stride), pads, kind)
    np.testing.assert_allclose(np_(p(spora.Tensor(x))), want, rtol=1e-12)


def test_pool_grads():
    x = spora.Tensor(rnd(1, 2, 6, 6, seed=9))
    check_grads(nn.AvgPool2d(3, 2, pad_mode="same"), [x])
    check_grads(nn.MaxPool2d(2), [x])


# -- normalisation ------------------------------------------------------------------

def test_batchnorm2d_train_updates_moving_stats_and_eval_uses_them():
    bn = nn.BatchNorm2d(3, momentum=0.9, dtype=F64)
    bn.gamma.set_data(spora.Tensor(np.array([1.0, 2.0, 0.5])))
    bn.beta.set_data(spora.Tensor(np.array([0.0, -1.0, 3.0])))
    x = rnd(4, 3, 5, 5, seed=10) * 2 + 1
    bn.set_train(True)
    y = np_(bn(spora.Tensor(x)))
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    xhat = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y, xhat * np_(bn.gamma)[None, :, None, None] + np_(bn.beta)[None, :, None, None],
                               rtol=1e-9, atol=1e-12)
    m = x.shape[0] * x.shape[2] * x.shape[3]
    want_mean = 0.1 * mean
    want_var = 0.9 * 1.0 + 0.1 * var * m / (m - 1)
    np.testing.assert_allclose(np_(bn.moving_mean), want_mean, rtol=1e-10)
    np.testing.assert_allclose(np_(bn.moving_variance), want_var, rtol=1e-10)
    bn.set_train(False)
    x2 = rnd(2, 3, 5, 5, seed=11)
    y2 = np_(bn(spora.Tensor(x2)))
    ref = (x2 - want_mean[None, :, None, None]) / np.sqrt(want_var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y2, ref * np_(bn.gamma)[None, :, None, None] + np_(bn.beta)[None, :, None, None],
                               rtol=1e-9)
    np.testing.assert_allclose(np_(bn.moving_mean), want_mean, rtol=1e-12)  # eval leaves them alone


def test_batchnorm1d_forward_and_grads():
    bn = nn.BatchNorm1d(4, dtype=F64).set_train(True)
    x = rnd(6, 4, seed=12)
    y = np_(bn(spora.Tensor(x)))
    np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-9, atol=1e-12)
    check_grads(bn, [spora.Tensor(x)])
    assert [p.name for p in bn.trainable_params()] == ["gamma", "beta"]
    assert [p.name for p in bn.untrainable_params()] == ["moving_mean", "moving_variance"]


def test_layernorm_forward_and_grads():
    ln = nn.LayerNorm((3, 4), dtype=F64)
    ln.gamma.set_data(spora.Tensor(rnd(3, 4, seed=13)))
    ln.beta.set_data(spora.Tensor(rnd(3, 4, seed=14)))
    x = rnd(2, 3, 4, seed=15)
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5) * np_(ln.gamma) + np_(ln.beta)
    np.testing.assert_allclose(np_(ln(spora.Tensor(x))), want, rtol=1e-9, atol=1e-12)
    check_grads(ln, [spora.Tensor(x)])


# -- dropout ------------------------------------------------------------------------

def test_dropout_scales_kept_elements_and_is_identity_in_eval():
    d = nn.Dropout(p=0.25)
    x = np.ones((200, 100), np.float32)
    d.set_train(True)
    y1 = np_(d(spora.Tensor(x)))
    y2 = np_(d(spora.Tensor(x)))
    kept = y1 != 0
    np.testing.assert_allclose(y1[kept], 1 / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.01
    assert (y1 != y2).any(), "each call must draw a new mask"
    d.set_train(False)
    np.testing.assert_array_equal(np_(d(spora.Tensor(x))), x)
    assert nn.Dropout(keep_prob=0.9).p == pytest.approx(0.1)
    with pytest.raises(ValueError):
        nn.Dropout(p=1.0)


def test_dropout_in_graph_mode_draws_new_masks():
    spora.set_context(mode=spora.GRAPH_MODE)
    net = nn.SequentialCell(nn.Dropout(p=0.5)).set_train(True)
    x = spora.Tensor(np.ones((64, 64), np.float32))
    y1, y2 = np_(net(x)), np_(net(x))
    for y in (y1, y2):
        assert set(np.unique(y)) <= {0.0, 2.0}
        assert abs((y != 0).mean() - 0.5) < 0.05
    assert (y1 != y2).any()
    net.set_train(False)
    np.testing.assert_array_equal(np_(net(x)), np_(x))


# -- activations -------------------------------------------------------------------------

def _erf(x):
    return np.vectorize(math.erf)(x)


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (nn.GELU(approximate=True), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.Softmax(axis=1), lambda x: np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)),
    (nn.LogSoftmax(), lambda x: x - np.log(np.exp(x).sum(axis=-1, keepdims=True))),
]


@pytest.mark.parametrize("cell,ref", ACTIVATIONS, ids=lambda v: type(v).__name__ if isinstance(v, nn.Cell) else "")
def test_activation_forward_and_grad(cell, ref):
    x = rnd(3, 5, seed=16)
    np.testing.assert_allclose(np_(cell(spora.Tensor(x))), ref(x), rtol=1e-7, atol=1e-12)
    check_grads(cell, [spora.Tensor(x)], params=False)


# -- attention ------------------------------------------------------------------------------

def mha_ref(q, k, v, w_in, b_in, w_out, b_out, heads, attn_mask=None, pad_mask=None):
    """(N, L, E) layout."""
    e = q.shape[-1]
    d = e // heads
    qp = q @ w_in[:e].T + b_in[:e]
    kp = k @ w_in[e:2 * e].T + b_in[e:2 * e]
    vp = v @ w_in[2 * e:].T + b_in[2 * e:]
    n, lq, _ = q.shape
    s = k.shape[1]
    qh = qp.reshape(n, lq, heads, d).transpose(0, 2, 1, 3)
    kh = kp.reshape(n, s, heads, d).transpose(0, 2, 1, 3)
    vh = vp.reshape(n, s, heads, d).transpose(0, 2, 1, 3)
    sc = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(d)
    if attn_mask is not None:
        sc = np.where(attn_mask[None, None], -np.inf, sc)
    if pad_mask is not None:
        sc = np.where(pad_mask[:, None, None, :], -np.inf, sc)
    a = np.exp(sc - sc.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    o = (a @ vh).transpose(0, 2, 1, 3).reshape(n, lq, e)
    return o @ w_out.T + b_out, a.mean(axis=1)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_forward(batch_first):
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=F64)
    mha.in_proj_bias.set_data(spora.Tensor(rnd(24, seed=17)))
    mha.out_proj.bias.set_data(spora.Tensor(rnd(8, seed=18)))
    q, k, v = rnd(2, 3, 8, seed=19), rnd(2, 5, 8, seed=20), rnd(2, 5, 8, seed=21)
    mask = np.zeros((3, 5), bool)
    mask[0, 4] = mask[2, 1] = True
    pad = np.zeros((2, 5), bool)
    pad[1, 3] = True
    want, want_w = mha_ref(q, k, v, np_(mha.in_proj_weight), np_(mha.in_proj_bias), np_(mha.out_proj.weight),
                           np_(mha.out_proj.bias), 2, mask, pad)
    args = [q, k, v] if batch_first else [a.transpose(1, 0, 2) for a in (q, k, v)]
    out, w = mha(*[spora.Tensor(a) for a in args], key_padding_mask=spora.Tensor(pad),
                 attn_mask=spora.Tensor(mask))
    out = np_(out) if batch_first else np_(out).transpose(1, 0, 2)
    np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np_(w), want_w, rtol=1e-9, atol=1e-12)


def test_multihead_attention_grads():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=F64)
    x = spora.Tensor(rnd(2, 3, 4, seed=22))

    class Self(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def construct(self, x):
            return self.mha(x, x, x, need_weights=False)[0]
    check_grads(Self(), [x])


def test_transformer_encoder_layer_matches_reference():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, dtype=F64)
    x = rnd(2, 4, 8, seed=23)
    p = {n: np_(t) for n, t in layer.parameters_and_names()}
    sa, _ = mha_ref(x, x, x, p["self_attn.in_proj_weight"], p["self_attn.in_proj_bias"],
                    p["self_attn.out_proj.weight"], p["self_attn.out_proj.bias"], 2)

    def ln(v, g, b):
        return (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5) * g + b
    h = ln(x + sa, p["norm1.gamma"], p["norm1.beta"])
    ff = np.maximum(h @ p["linear1.weight"].T + p["linear1.bias"], 0) @ p["linear2.weight"].T + p["linear2.bias"]
    want = ln(h + ff, p["norm2.gamma"], p["norm2.beta"])
    np.testing.assert_allclose(np_(layer(spora.Tensor(x))), want, rtol=1e-9, atol=1e-11)
    check_grads(layer, [spora.Tensor(x)], samples=4)


# -- initializers ---------------------------------------------------------------------------

def test_initializers_statistics():
    init = nn.init
    big = (400, 300)
    u = np_(init.initializer(init.XavierUniform(), big))
    assert abs(u.max() - math.sqrt(6 / 700)) < 1e-3 and abs(u.min() + math.sqrt(6 / 700)) < 1e-3
    hn = np_(init.initializer(init.HeNormal(nonlinearity="relu"), big))
    assert abs(hn.std() - math.sqrt(2 / 300)) < 0.003
    hu = np_(init.initializer(init.HeUniform(), big))
    assert abs(hu.max() - math.sqrt(6 / 300)) < 2e-3
    tn = np_(init.initializer(init.TruncatedNormal(sigma=0.5), big))
    assert tn.max() <= 1.0 and tn.min() >= -1.0
    n = np_(init.initializer(init.Normal(2.0, 1.0), big))
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 2.0) < 0.02
    assert np.all(np_(init.initializer("zeros", (3,))) == 0) and np.all(np_(init.initializer("ones", (3,))) == 1)
    assert np.all(np_(init.initializer(2.5, (2, 2))) == 2.5)
    with pytest.raises(ValueError, match="unknown initializer"):
        init.initializer("nope", (2,))
    init.set_seed(7)
    a = np_(init.initializer("normal", (5,)))
    init.set_seed(7)
    np.testing.assert_array_equal(a, np_(init.initializer("normal", (5,))))
