"""The functional ops a MindSpore or PyTorch user reaches for (issue 20
lines 3-5, issue 22's ops.binary_cross_entropy_with_logits): class weights
in cross_entropy / nll_loss and their cells, pad modes (circular), the
functional bce-with-logits, conv_transpose2d with a bias and
nn.Conv2dTranspose, amax / amin, swapaxes, matmul's transpose flags,
gather_elements / index_select / group_norm in MindSpore's order. Values
against NumPy references, gradients against central finite differences of
the same forward in float64."""
import numpy as np
import pytest

import spora
from spora import nn, ops

RNG = np.random.default_rng(20)


def T(a):
    return spora.Tensor(np.asarray(a))


def check_grad(fn, arrays, wrt=(0,), eps=1e-6, rtol=1e-5, atol=1e-7):
    """spora.grad of fn (Tensors -> scalar Tensor) at float64 `arrays`
    against central differences of fn itself, for each position in wrt."""
    arrays = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a) for a in arrays]
    got = spora.grad(fn, grad_position=tuple(wrt))(*[T(a) for a in arrays])
    if not isinstance(got, tuple):
        got = (got,)
    for g, i in zip(got, wrt):
        num = np.zeros_like(arrays[i])
        for k in np.ndindex(arrays[i].shape):
            hi = [a.copy() for a in arrays]
            lo = [a.copy() for a in arrays]
            hi[i][k] += eps
            lo[i][k] -= eps
            num[k] = (fn(*[T(a) for a in hi]).item() - fn(*[T(a) for a in lo]).item()) / (2 * eps)
        np.testing.assert_allclose(g.asnumpy(), num, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


# -- cross_entropy / nll_loss with class weights ----------------------------------------

def _log_softmax(x, axis=1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def ref_nll(logp, t, w, ignore_index=-100, reduction="mean", eps=0.0):
    """PyTorch's weighted nll with label smoothing, logp (N, C, ...)."""
    c = logp.shape[1]
    w = np.ones(c) if w is None else w
    valid = t != ignore_index
    ts = np.where(valid, t, 0)
    picked = np.take_along_axis(logp, ts[:, None], 1)[:, 0]
    wt = w[ts] * valid
    shape = (1, c) + (1,) * (logp.ndim - 2)
    loss = -(1 - eps) * picked * wt - eps / c * (logp * w.reshape(shape)).sum(1) * valid
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / wt.sum()


@pytest.mark.parametrize("shape", [(6, 5), (3, 4, 2, 3)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_cross_entropy_class_weights(shape, reduction, eps):
    x = RNG.standard_normal(shape).astype(np.float32)
    c = shape[1]
    t = RNG.integers(0, c, (shape[0],) + shape[2:])
    t.flat[1] = -100
    t.flat[3] = 7 if c > 7 else -100
    t[t == 7] = -100
    w = RNG.uniform(0.2, 2.0, c).astype(np.float32)
    got = ops.cross_entropy(T(x), T(t), T(w), reduction=reduction, label_smoothing=eps).asnumpy()
    want = ref_nll(_log_softmax(x.astype(np.float64)), t, w, reduction=reduction, eps=eps)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    got = ops.nll_loss(T(_log_softmax(x)), T(t), T(w), -100, reduction, eps).asnumpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_cross_entropy_weights_and_ignore_index_positional():
    """MindSpore's order: (input, target, weight, ignore_index, reduction,
    label_smoothing)."""
    x = RNG.standard_normal((5, 4))
    t = np.array([0, 3, 1, 2, 1])
    w = np.array([1.0, 2.0, 0.5, 3.0])
    got = ops.cross_entropy(T(x), T(t), T(w), 1, "sum").item()
    assert got == pytest.approx(ref_nll(_log_softmax(x), t, w, ignore_index=1, reduction="sum"), rel=1e-12)
    # Without weights the core op runs: same answer as weights of ones.
    a = ops.cross_entropy(T(x), T(t), None, 2, "mean", 0.1).item()
    b = ops.cross_entropy(T(x), T(t), T(np.ones(4)), 2, "mean", 0.1).item()
    assert a == pytest.approx(b, rel=1e-12)


def test_cross_entropy_probabilities_with_weight():
    x = RNG.standard_normal((4, 3))
    p = RNG.dirichlet(np.ones(3), 4)
    w = np.array([0.5, 1.0, 2.0])
    got = ops.cross_entropy(T(x), T(p), T(w), reduction="none").asnumpy()
    np.testing.assert_allclose(got, -(p * w * _log_softmax(x)).sum(1), rtol=1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_cross_entropy_weight_gradient(eps):
    x = RNG.standard_normal((4, 3))
    t = np.array([2, 0, -100, 1])
    w = np.array([0.5, 1.5, 2.0])
    check_grad(lambda a: ops.cross_entropy(a, T(t), T(w), label_smoothing=eps), [x])
    check_grad(lambda a: ops.nll_loss(a, T(t), T(w), reduction="sum"), [_log_softmax(x)])


def test_weighted_losses_and_circular_pad_compile():
    """The compositions trace into one graph (spora.jit) with eager's values."""
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    t, w = np.array([0, 2, -100, 1]), np.array([0.5, 1.0, 2.0], np.float32)

    def f(a, b, c):
        return (ops.cross_entropy(a, b, c, label_smoothing=0.1) + ops.pad(a, (1, 2), mode="circular").sum()
                + ops.binary_cross_entropy_with_logits(a, a * 0 + 0.5, pos_weight=c))

    jf = spora.jit(f)
    assert jf(T(x), T(t), T(w)).item() == pytest.approx(f(T(x), T(t), T(w)).item(), rel=1e-6)
    assert jf.stats["traces"] == 1 and jf.stats["eager_calls"] == 0


def test_loss_cells_take_weight():
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    t = np.array([0, 1, 2, 3, 1, -1])
    w = np.array([1.0, 0.5, 2.0, 1.5], np.float32)
    ref = ref_nll(_log_softmax(x.astype(np.float64)), t, w, ignore_index=-1)
    assert nn.CrossEntropyLoss(T(w), -1)(T(x), T(t)).item() == pytest.approx(ref, rel=1e-5)
    assert nn.CrossEntropyLoss(weight=T(w), ignore_index=-1)(T(x), T(t)).item() == pytest.approx(ref, rel=1e-5)
    assert nn.NLLLoss(T(w), -1)(T(_log_softmax(x)), T(t)).item() == pytest.approx(ref, rel=1e-5)
    with pytest.raises(TypeError, match=r"\[CrossEntropyLoss\] weight takes a tensor"):
        nn.CrossEntropyLoss(-100)


def test_cross_entropy_weight_errors():
    x, t = T(np.zeros((2, 3), np.float32)), T([0, 1])
    with pytest.raises(ValueError, match=r"\[cross_entropy\] weight must have one entry per class, shape \(3,\)"):
        ops.cross_entropy(x, t, T(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match=r"\[nll_loss\] reduction must be"):
        ops.nll_loss(x, t, reduction="avg")
    with pytest.raises(TypeError, match=r"\[cross_entropy\] ignore_index takes an int"):
        ops.cross_entropy(x, t, None, "x")


# -- binary_cross_entropy_with_logits ---------------------------------------------------

def ref_bce(x, y, w=None, pw=None, reduction="mean"):
    sig = 1 / (1 + np.exp(-x))
    pw = 1.0 if pw is None else pw
    loss = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    loss = loss * (1.0 if w is None else w)
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits(reduction):
    x = RNG.standard_normal((4, 3)) * 3
    y = RNG.uniform(0, 1, (4, 3))
    w = RNG.uniform(0.5, 2, (4, 1))
    pw = np.array([0.5, 1.0, 3.0])
    for args in [(None, None), (T(w), None), (None, T(pw)), (T(w), T(pw))]:
        got = ops.binary_cross_entropy_with_logits(T(x), T(y), *args, reduction=reduction).asnumpy()
        want = ref_bce(x, y, *[None if a is None else a.asnumpy() for a in args], reduction=reduction)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_bce_with_logits_is_stable_and_differentiable():
    x = np.array([-200.0, -30.0, 0.0, 30.0, 200.0], np.float32)
    y = np.array([1.0, 0.0, 0.5, 1.0, 0.0], np.float32)
    got = ops.binary_cross_entropy_with_logits(T(x), T(y), reduction="none").asnumpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, [200.0, 0.0, np.log(2.0), 0.0, 200.0], rtol=1e-6, atol=1e-6)
    xs, ys = RNG.standard_normal((3, 2)), RNG.uniform(0, 1, (3, 2))
    pw, w = np.array([2.0, 0.5]), RNG.uniform(0.5, 2, (3, 2))
    check_grad(lambda a, b: ops.binary_cross_entropy_with_logits(a, b, T(w), T(pw)), [xs, ys], wrt=(0, 1))


def test_bce_with_logits_errors():
    with pytest.raises(ValueError, match=r"\[binary_cross_entropy_with_logits\] logits \(2,\) and label \(3,\)"):
        ops.binary_cross_entropy_with_logits(T(np.zeros(2)), T(np.zeros(3)))


# -- pad -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes_match_numpy(mode, np_mode):
    x = RNG.standard_normal((2, 3, 4, 5))
    got = ops.pad(T(x), (2, 1, 0, 3), mode=mode).asnumpy()
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (0, 3), (2, 1)), mode=np_mode))


def test_pad_constant_value_and_negative_crop():
    x = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(ops.pad(T(x), (1, 1), value=7.5).asnumpy(),
                                  np.pad(x, ((0, 0), (1, 1)), constant_values=7.5))
    got = ops.pad(T(x), (-1, 2, 1, -2)).asnumpy()
    np.testing.assert_array_equal(got, np.pad(x[:1, 1:], ((1, 0), (0, 2))))
    np.testing.assert_array_equal(ops.pad(T(x), (-1, 0), mode="circular").asnumpy(), x[:, 1:])


def test_pad_circular_whole_dim_and_gradient():
    x = RNG.standard_normal((2, 3))
    np.testing.assert_array_equal(ops.pad(T(x), (3, 3, 2, 1), mode="circular").asnumpy(),
                                  np.pad(x, ((2, 1), (3, 3)), mode="wrap"))
    probe = RNG.standard_normal((2 + 1 + 1, 3 + 2 + 3))
    check_grad(lambda a: (ops.pad(a, (2, 3, 1, 1), mode="circular") * T(probe)).sum(), [x])
    probe = RNG.standard_normal((2, 3 + 2 + 1))
    check_grad(lambda a: (ops.pad(a, (2, 1), mode="reflect") * T(probe)).sum(), [x])


def test_pad_errors():
    x = T(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"\[pad\] circular padding \(4, 0\) of dim 1 is larger than the dim \(3\)"):
        ops.pad(x, (4, 0), mode="circular")
    with pytest.raises(ValueError, match=r"\[pad\] mode must be"):
        ops.pad(x, (1, 1), mode="wrap")
    with pytest.raises(ValueError, match=r"\[pad\] padding takes an even number"):
        ops.pad(x, (1, 1, 1))
    with pytest.raises(TypeError, match=r"\[pad\] padding takes an int, got a float"):
        ops.pad(x, (1.5, 1))
    with pytest.raises(ValueError, match=r"\[pad\] value is for mode 'constant' only"):
        ops.pad(x, (1, 1), mode="reflect", value=1.0)


# -- conv_transpose2d / nn.Conv2dTranspose ------------------------------------------------

def ref_conv_transpose(x, w, b=None, stride=(1, 1), pads=(0, 0, 0, 0), out_pad=(0, 0), dil=(1, 1), groups=1):
    """Scatter form: every input pixel adds w * x at stride * position,
    then the full output is cropped by pads and grown by out_pad."""
    n, cin, h, wd = x.shape
    _, cpg, kh, kw = w.shape
    H = (h - 1) * stride[0] + dil[0] * (kh - 1) + 1 + out_pad[0]
    W = (wd - 1) * stride[1] + dil[1] * (kw - 1) + 1 + out_pad[1]
    y = np.zeros((n, cpg * groups, H, W))
    ipg = cin // groups
    for ci in range(cin):
        g = ci // ipg
        for i in range(h):
            for j in range(wd):
                for p in range(kh):
                    for q in range(kw):
                        y[:, g * cpg:(g + 1) * cpg, i * stride[0] + p * dil[0], j * stride[1] + q * dil[1]] += \
                            x[:, ci, i, j][:, None] * w[ci, :, p, q][None, :]
    y = y[:, :, pads[0]:H - pads[1], pads[2]:W - pads[3]]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("stride,padding,out_pad,dil,groups", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 0, 2, 1, 2), (2, 1, 0, 2, 1)])
def test_conv_transpose2d_with_bias(stride, padding, out_pad, dil, groups):
    x = RNG.standard_normal((2, 4, 3, 4))
    w = RNG.standard_normal((4, 3, 2, 3))
    b = RNG.standard_normal(3 * groups)
    got = ops.conv_transpose2d(T(x), T(w), T(b), stride, padding, out_pad, groups, dil).asnumpy()
    want = ref_conv_transpose(x, w, b, (stride,) * 2, (padding,) * 4, (out_pad,) * 2, (dil,) * 2, groups)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert ops.conv2d_transpose is ops.conv_transpose2d


def test_conv_transpose2d_gradients():
    x = RNG.standard_normal((1, 2, 2, 3))
    w = RNG.standard_normal((2, 2, 2, 2))
    b = RNG.standard_normal(2)
    probe = RNG.standard_normal((1, 2, 4, 6))
    check_grad(lambda a, k, c: (ops.conv_transpose2d(a, k, c, stride=2) * T(probe)).sum(), [x, w, b],
               wrt=(0, 1, 2))


def test_conv_transpose2d_bias_shape_error():
    with pytest.raises(ValueError, match=r"\[conv_transpose2d\] bias must have shape \(3,\)"):
        ops.conv_transpose2d(T(np.zeros((1, 2, 3, 3))), T(np.zeros((2, 3, 2, 2))), T(np.zeros(2)))


@pytest.mark.parametrize("pad_mode", ["same", "valid", "pad"])
@pytest.mark.parametrize("stride,k", [(1, 3), (2, 3), (2, 2), (3, 1)])
def test_nn_conv2d_transpose(pad_mode, stride, k):
    pad = 1 if pad_mode == "pad" and k > 1 else 0
    net = nn.Conv2dTranspose(4, 6, k, stride=stride, pad_mode=pad_mode, padding=pad, group=2, has_bias=True,
                             weight_init="normal", bias_init="normal")
    assert net.weight.shape == (4, 3, k, k) and net.bias.shape == (6,)
    x = RNG.standard_normal((2, 4, 5, 4)).astype(np.float32)
    y = net(T(x)).asnumpy()
    w, b = net.weight.asnumpy().astype(np.float64), net.bias.asnumpy().astype(np.float64)
    full = ref_conv_transpose(x.astype(np.float64), w, b, (stride, stride), groups=2)
    if pad_mode == "same":
        want_hw = (5 * stride, 4 * stride)
        crop = max(k - stride, 0)
        top, bottom = crop // 2, crop - crop // 2
        full = full[:, :, top:full.shape[2] - bottom, top:full.shape[3] - bottom]
    elif pad_mode == "valid":
        want_hw = (5 * stride + max(k - stride, 0), 4 * stride + max(k - stride, 0))
    else:
        want_hw = ((5 - 1) * stride - 2 * pad + k, (4 - 1) * stride - 2 * pad + k)
        full = full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]
    assert y.shape == (2, 6) + want_hw
    # Rows past the full output (stride > kernel) hold the bias alone.
    want = np.broadcast_to(b.reshape(1, -1, 1, 1), y.shape).copy()
    want[:, :, :full.shape[2], :full.shape[3]] = full[:, :, :want_hw[0], :want_hw[1]]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_nn_conv2d_transpose_arguments():
    net = nn.Conv2dTranspose(2, 2, 3, 2, "pad", (1, 0, 1, 0), 1, 1, 1, False)
    assert not net.has_bias and net.output_padding == [1, 1] and net.padding == [1, 0, 1, 0]
    assert net(T(np.ones((1, 2, 4, 4), np.float32))).shape == (1, 2, 9, 9)
    with pytest.raises(ValueError, match=r"\[Conv2dTranspose\] padding and output_padding must be 0 unless"):
        nn.Conv2dTranspose(2, 2, 3, pad_mode="same", padding=1)
    with pytest.raises(ValueError, match=r"\[Conv2dTranspose\] expects input \(N, 2, H, W\)"):
        nn.Conv2dTranspose(2, 2, 3)(T(np.ones((1, 3, 4, 4), np.float32)))


# -- amax / amin, swapaxes, matmul flags -------------------------------------------------

def test_amax_amin():
    x = RNG.standard_normal((3, 4, 5))
    for axis in [None, 1, -1, (0, 2)]:
        for keep in (False, True):
            np.testing.assert_array_equal(ops.amax(T(x), axis, keep).asnumpy(), np.amax(x, axis, keepdims=keep))
            np.testing.assert_array_equal(ops.amin(T(x), axis, keep).asnumpy(), np.amin(x, axis, keepdims=keep))
    check_grad(lambda a: (ops.amax(a, (0, 2)) * T([1.0, 2.0, 3.0, 4.0])).sum(), [x])
    check_grad(lambda a: ops.amin(a, 1).sum(), [x])
    # Tied maxima share the gradient equally, as in PyTorch.
    g = spora.grad(lambda a: ops.amax(a, 1).sum())(T(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])))
    np.testing.assert_allclose(g.asnumpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])


def test_max_min_along_an_axis_return_values_and_indices():
    x = RNG.standard_normal((3, 4))
    v, i = ops.max(T(x), 1)
    np.testing.assert_array_equal(v.asnumpy(), x.max(1))
    np.testing.assert_array_equal(i.asnumpy(), x.argmax(1))
    v, i = ops.min(T(x), 0, True)
    np.testing.assert_array_equal(v.asnumpy(), x.min(0, keepdims=True))
    np.testing.assert_array_equal(i.asnumpy(), x.argmin(0)[None])
    assert ops.max(T(x)).item() == x.max()
    with pytest.raises(TypeError, match=r"\[max\] axis takes one int"):
        ops.max(T(x), (0, 1))


def test_swapaxes():
    x = RNG.standard_normal((2, 3, 4))
    np.testing.assert_array_equal(ops.swapaxes(T(x), 0, 2).asnumpy(), np.swapaxes(x, 0, 2))
    np.testing.assert_array_equal(ops.swapaxes(T(x), -1, 1).asnumpy(), np.swapaxes(x, -1, 1))
    probe = RNG.standard_normal((4, 3, 2))
    check_grad(lambda a: (ops.swapaxes(a, 0, -1) * T(probe)).sum(), [x])
    with pytest.raises(ValueError, match=r"\[swapaxes\] axis1 3 is out of range for a 3-d tensor"):
        ops.swapaxes(T(x), 0, 3)
    with pytest.raises(TypeError, match=r"\[swapaxes\] axis0 takes an int, got a float"):
        ops.swapaxes(T(x), 0.5, 1)


@pytest.mark.parametrize("ta,tb", [(False, True), (True, False), (True, True)])
def test_matmul_transpose_flags(ta, tb):
    a = RNG.standard_normal((2, 4, 3) if ta else (2, 3, 4))
    b = RNG.standard_normal((2, 5, 4) if tb else (2, 4, 5))
    want = (np.swapaxes(a, -1, -2) if ta else a) @ (np.swapaxes(b, -1, -2) if tb else b)
    np.testing.assert_allclose(ops.matmul(T(a), T(b), transpose_a=ta, transpose_b=tb).asnumpy(), want,
                               rtol=1e-12)
    probe = RNG.standard_normal(want.shape)
    check_grad(lambda x, y: (ops.matmul(x, y, transpose_a=ta, transpose_b=tb) * T(probe)).sum(), [a, b],
               wrt=(0, 1))


# -- MindSpore's argument order --------------------------------------------------------

def test_gather_elements_index_select_group_norm_in_mindspore_order():
    x = RNG.standard_normal((3, 4))
    idx = RNG.integers(0, 4, (3, 2))
    np.testing.assert_array_equal(ops.gather_elements(T(x), 1, T(idx)).asnumpy(),
                                  np.take_along_axis(x, idx, 1))
    check_grad(lambda a: (ops.gather_elements(a, 1, T(idx)) * T(np.arange(6.0).reshape(3, 2))).sum(), [x])
    sel = np.array([2, 0, 2])
    np.testing.assert_array_equal(ops.index_select(T(x), 1, T(sel)).asnumpy(), x[:, sel])
    np.testing.assert_array_equal(ops.index_select(T(x), -2, T(sel[:2])).asnumpy(), x[sel[:2]])
    g = RNG.standard_normal((2, 6, 5))
    w, b = RNG.standard_normal(6), RNG.standard_normal(6)
    r = g.reshape(2, 3, 10)
    want = ((r - r.mean(2, keepdims=True)) / np.sqrt(r.var(2, keepdims=True) + 1e-5)).reshape(2, 6, 5)
    np.testing.assert_allclose(ops.group_norm(T(g), 3, T(w), T(b)).asnumpy(),
                               want * w[None, :, None] + b[None, :, None], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ops.group_norm(T(g), 3).asnumpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_in_mindspore_order(training):
    x = RNG.standard_normal((4, 3, 5))
    rm, rv = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3)
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    pm, pv = spora.Parameter(T(rm), name="rm"), spora.Parameter(T(rv), name="rv")
    y = ops.batch_norm(T(x), pm, pv, T(w), T(b), training, 0.2, 1e-3).asnumpy()
    c = lambda v: v[None, :, None]  # noqa: E731
    if training:
        mean, var = x.mean((0, 2)), x.var((0, 2))
        want = (x - c(mean)) / np.sqrt(c(var) + 1e-3) * c(w) + c(b)
        np.testing.assert_allclose(pm.asnumpy(), 0.8 * rm + 0.2 * mean, rtol=1e-12)
        np.testing.assert_allclose(pv.asnumpy(), 0.8 * rv + 0.2 * x.var((0, 2), ddof=1), rtol=1e-12)
    else:
        want = (x - c(rm)) / np.sqrt(c(rv) + 1e-3) * c(w) + c(b)
        np.testing.assert_array_equal(pm.asnumpy(), rm)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"\[batch_norm\] weight must have shape \(3,\)"):
        ops.batch_norm(T(x), T(rm), T(rv), T(np.ones(4)), T(b))


def test_old_order_says_what_to_write():
    x, idx = T(np.zeros((3, 4))), T([0, 1])
    with pytest.raises(TypeError, match=r"\[index_select\] axis takes an int and index a tensor: MindSpore's order"):
        ops.index_select(x, idx, 1)
    with pytest.raises(TypeError, match=r"\[gather_elements\] dim takes an int and index a tensor"):
        ops.gather_elements(x, T(np.zeros((3, 4), np.int64)), 0)
    with pytest.raises(TypeError, match=r"\[index_select\] index takes an int32 or int64 tensor of indices, got a "
                                        r"float64 tensor of shape \(2,\)"):
        ops.index_select(x, 0, T([0.0, 1.0]))
    with pytest.raises(TypeError, match=r"\[conv2d\] pad_mode takes 'valid', 'same' or 'pad', got a int"):
        ops.conv2d(T(np.zeros((1, 1, 3, 3))), T(np.zeros((1, 1, 3, 3))), None, 1, 1)
    with pytest.raises(TypeError, match=r"\[flatten\] the second argument is order"):
        ops.flatten(x, 0)


def test_mindspore_order_values():
    """The positional meaning MindSpore gives (issue 20 line 4)."""
    x = RNG.standard_normal((3, 5))
    np.testing.assert_allclose(ops.var(T(x), 1, 1).asnumpy(), np.var(x, 1, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(ops.std(T(x), 0, 1, True).asnumpy(), np.std(x, 0, ddof=1, keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose(T(x).var(1, 1).asnumpy(), np.var(x, 1, ddof=1), rtol=1e-12)
    s = T(x).sum(0, spora.float32)
    assert s.dtype == spora.float32 and s.shape == (5,)
    assert T(x).sum(0, keepdims=True).shape == (1, 5) and ops.sum(T(x), 0, True).shape == (1, 5)
    with pytest.raises(TypeError, match=r"\[Tensor.sum\] the second argument is dtype"):
        T(x).sum(0, True)
    np.testing.assert_array_equal(ops.one_hot(T([0, 2]), 3, 5.0, -1.0, 0).asnumpy(),
                                  np.where(np.eye(3)[[0, 2]].T > 0, 5.0, -1.0))
    assert ops.flatten(T(np.zeros((2, 3, 4)))).shape == (2, 12)
    assert ops.flatten(T(np.zeros((2, 3, 4))), start_dim=0).shape == (24,)
    u = ops.uniform((2000,), 2.0, 3.0, 7).asnumpy()
    np.testing.assert_array_equal(u, ops.uniform((2000,), 2.0, 3.0, seed=7).asnumpy())
    assert 2.0 <= u.min() and u.max() < 3.0
    n = ops.normal((4000,), 1.0, 0.5, 3, dtype=spora.float64)
    assert n.dtype == spora.float64 and abs(n.asnumpy().mean() - 1.0) < 0.05
    a = RNG.standard_normal((1, 2, 4, 4))
    np.testing.assert_allclose(ops.avg_pool2d(T(a), 2).asnumpy(),  # stride 1 by default (MindSpore)
                               (a[..., :-1, :-1] + a[..., 1:, :-1] + a[..., :-1, 1:] + a[..., 1:, 1:]) / 4,
                               rtol=1e-12)
    np.testing.assert_allclose(ops.avg_pool2d(T(a), 2, 2, divisor_override=1).asnumpy(),
                               a.reshape(1, 2, 2, 2, 2, 2).sum((3, 5)), rtol=1e-12)
    assert ops.leaky_relu(T([-1.0])).item() == pytest.approx(-0.2)
    y = ops.conv2d(T(np.ones((1, 1, 4, 4))), T(np.ones((1, 1, 3, 3))), None, 1, "pad", 1)
    assert y.shape == (1, 1, 4, 4) and y.asnumpy()[0, 0, 0, 0] == 4.0
    assert ops.conv2d(T(np.ones((1, 1, 4, 4))), T(np.ones((1, 1, 3, 3))), padding=1).shape == (1, 1, 4, 4)
    assert ops.conv2d(T(np.ones((1, 1, 4, 4))), T(np.ones((1, 1, 3, 3))), None, 1, "same").shape == (1, 1, 4, 4)


# The signatures changed for issue 20 line 4, pinned (MindSpore's order; what
# MindSpore lacks or orders otherwise is keyword only).
SIGNATURES = {
    "var": "(x, axis=None, ddof=0, keepdims=False)",
    "std": "(x, axis=None, ddof=0, keepdims=False)",
    "sum": "(x, axis=None, keepdims=False, *, dtype=None)",
    "max": "(x, axis=None, keepdims=False)",
    "min": "(x, axis=None, keepdims=False)",
    "amax": "(x, axis=None, keepdims=False)",
    "amin": "(x, axis=None, keepdims=False)",
    "softmax": "(x, axis=-1, *, dim=None)",
    "log_softmax": "(x, axis=-1, *, dim=None)",
    "flatten": "(x, order='C', *, start_dim=1, end_dim=-1)",
    "swapaxes": "(x, axis0, axis1)",
    "matmul": "(a, b, *, transpose_a=False, transpose_b=False)",
    "gather_elements": "(input, dim, index)",
    "index_select": "(input, axis, index)",
    "one_hot": "(indices, depth, on_value=1.0, off_value=0.0, axis=-1, *, dtype=spora.float32)",
    "zeros": "(shape, dtype=spora.float32, *, device=None)",
    "ones": "(shape, dtype=spora.float32, *, device=None)",
    "full": "(shape, value, dtype=spora.float32, *, device=None)",
    "arange": "(start=0, stop=None, step=1, *, dtype=None, device=None)",
    "eye": "(n, m=None, dtype=spora.float32, *, device=None)",
    "uniform": "(shape, low=0.0, high=1.0, seed=None, *, dtype=spora.float32, device=None)",
    "normal": "(shape, mean=0.0, std=1.0, seed=None, *, dtype=spora.float32, device=None)",
    "conv2d": "(input, weight, bias=None, stride=1, pad_mode='valid', padding=0, dilation=1, groups=1)",
    "conv_transpose2d": "(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)",
    "max_pool2d": "(input, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, "
                  "ceil_mode=False)",
    "avg_pool2d": "(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True, "
                  "divisor_override=0)",
    "cross_entropy": "(input, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)",
    "nll_loss": "(inputs, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)",
    "binary_cross_entropy_with_logits": "(logits, label, weight=None, pos_weight=None, reduction='mean')",
    "group_norm": "(input, num_groups, weight=None, bias=None, eps=1e-05)",
    "leaky_relu": "(input, alpha=0.2)",
    "batch_norm": "(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1, eps=1e-05)",
    "pad": "(input_x, padding, mode='constant', value=None)",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_pinned(name):
    import inspect
    assert str(inspect.signature(getattr(ops, name))) == SIGNATURES[name]


def test_cell_signatures_pinned():
    import inspect
    assert str(inspect.signature(nn.CrossEntropyLoss)) == \
        "(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)"
    assert str(inspect.signature(nn.NLLLoss)) == "(weight=None, ignore_index=-100, reduction='mean')"
    assert str(inspect.signature(nn.Conv2dTranspose)) == (
        "(in_channels, out_channels, kernel_size, stride=1, pad_mode='same', padding=0, output_padding=0, "
        "dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None, dtype=None)")


# -- errors name the op and the argument (issue 20 line 5) ------------------------------------

def test_registry_op_errors_name_op_and_attribute():
    x = T(np.ones((2, 6, 4), np.float32))
    w, b = T(np.ones(6, np.float32)), T(np.zeros(6, np.float32))
    with pytest.raises(TypeError, match=r"\[group_norm\] attribute 'groups' takes an int, got a float32 tensor "
                                        r"of shape \(6,\)"):
        ops.raw.group_norm(x, 3, w, b)
    with pytest.raises(TypeError, match=r"\[index_select\] attribute 'axis' takes an int, got a int64 tensor of "
                                        r"shape \(2,\)"):
        ops.raw.index_select(x, 1, T([0, 1]))
    with pytest.raises(TypeError, match=r"\[topk\] attribute 'k' takes an int, got a str"):
        ops.raw.topk(x, "2")
    with pytest.raises(TypeError, match=r"\[cross_entropy\] input 'target' takes a tensor or a number, got a str"):
        ops.raw.cross_entropy(T(np.zeros((2, 3), np.float32)), "a")
    # An integer one-element tensor is a fine int.
    assert ops.raw.index_select(x, T([0]), axis=T(np.int64(1))).shape == (2, 1, 4)


def test_functional_errors_name_op_and_argument():
    x = T(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"\[gather\] axis takes an int, got a int64 tensor of shape \(2,\)"):
        ops.gather(x, T([0, 1]), T([0, 1]))
    with pytest.raises(TypeError, match=r"\[group_norm\] num_groups takes an int, got a float32 tensor"):
        ops.group_norm(T(np.ones((2, 6, 4), np.float32)), T(np.ones(6, np.float32)))
    with pytest.raises(TypeError, match=r"\[var\] ddof takes an int, got a bool"):
        ops.var(x, 0, True)
    f = T(np.array([1.0], np.float32))
    for call, msg in [(lambda: ops.concat([x, x], f), r"\[concat\] axis takes an int, got a float32 tensor"),
                      (lambda: ops.stack([x, x], 0.5), r"\[stack\] axis takes an int, got a float \(0.5\)"),
                      (lambda: ops.split(x, [1, 1.5], 1), r"\[split\] split_size_or_sections takes an int"),
                      (lambda: ops.topk(x, f), r"\[topk\] k takes an int, got a float32 tensor"),
                      (lambda: ops.cumsum(x, "1"), r"\[cumsum\] axis takes an int, got a str"),
                      (lambda: ops.expand_dims(x, f), r"\[expand_dims\] axis takes an int")]:
        with pytest.raises(TypeError, match=msg):
            call()


def test_reduction_axis_errors_name_the_op():
    x = T(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"\[mean\] axis takes an int or a sequence of ints, got a float32 tensor "
                                        r"of shape \(1,\)"):
        ops.mean(x, T(np.array([0.5], np.float32)))
    with pytest.raises(TypeError, match=r"\[sum\] axis takes an int or a sequence of ints, got a str"):
        x.sum("a")
    with pytest.raises(TypeError, match=r"\[var\] axis takes an int or a sequence of ints, got float 1.0 in it"):
        ops.var(x, (0, 1.0))
    with pytest.raises(IndexError, match=r"\[prod\] axis 5 is out of range for a 2-d tensor"):
        ops.prod(x, 5)
    # Integer tensors are fine axes.
    assert ops.sum(x, T(np.int64(1))).shape == (2,) and ops.mean(x, T([0, 1])).item() == 1.0


# -- the compositions on another device (sim) agree with cpu ---------------------------------

def test_compositions_on_sim_match_cpu():
    if "sim:0" not in [str(d) for d in spora.devices()]:
        pytest.skip("no sim device in this build")
    x = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32)
    t = RNG.integers(0, 3, (4, 2, 2))
    t[0, 0, 0] = -100
    w = np.array([0.5, 1.0, 2.0], np.float32)
    k = RNG.standard_normal((3, 2, 2, 2)).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)

    def run(dev):
        spora.set_device(dev)
        a = spora.Tensor(x, device=dev)
        outs = [ops.cross_entropy(a, spora.Tensor(t, device=dev), spora.Tensor(w, device=dev), label_smoothing=0.1),
                ops.pad(a, (1, 2, 2, 0), mode="circular"),
                ops.binary_cross_entropy_with_logits(a, ops.sigmoid(a), pos_weight=spora.Tensor(np.float32(2.0),
                                                                                               device=dev)),
                ops.conv_transpose2d(a, spora.Tensor(k, device=dev), spora.Tensor(b, device=dev), 2),
                ops.amax(a, (1, 3)), ops.swapaxes(a, 0, 3),
                ops.matmul(a, a, transpose_b=True)]
        g = spora.grad(lambda v: ops.cross_entropy(v, spora.Tensor(t, device=dev), spora.Tensor(w, device=dev))
                       + ops.pad(v, (1, 1), mode="circular").square().sum())(a)
        assert all(o.device == dev for o in outs)
        return [o.asnumpy() for o in outs + [g]]

    for c, s in zip(run("cpu"), run("sim:0")):
        np.testing.assert_allclose(s, c, rtol=1e-5, atol=1e-6)


def _max_pool2d_ref(x, k, s, p, d, ceil):
    """Values and flat indices (h * W + w) of max pooling, the first maximum of each window."""
    n_, c_, h, w = x.shape

    def size(n, k, s, p, d):
        e = n + 2 * p - d * (k - 1) - 1
        o = (-(-e // s) if ceil else e // s) + 1
        return o - 1 if ceil and (o - 1) * s >= n + p else o
    oh, ow = size(h, k[0], s[0], p[0], d[0]), size(w, k[1], s[1], p[1], d[1])
    v = np.full((n_, c_, oh, ow), -np.inf, np.float32)
    ix = np.zeros((n_, c_, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                    if 0 <= r < h and 0 <= q < w:
                        better = x[:, :, r, q] > v[:, :, i, j]
                        v[:, :, i, j] = np.where(better, x[:, :, r, q], v[:, :, i, j])
                        ix[:, :, i, j] = np.where(better, r * w + q, ix[:, :, i, j])
    return v, ix


@pytest.mark.parametrize("k,s,p,d,ceil", [((2, 2), (2, 2), (0, 0), (1, 1), False),
                                          ((3, 3), (2, 2), (1, 1), (1, 1), True),
                                          ((3, 2), (1, 2), (1, 0), (2, 1), False),
                                          ((2, 2), (2, 2), (0, 0), (1, 1), True)])
def test_max_pool2d_return_indices_match_a_reference(k, s, p, d, ceil):
    x = np.random.default_rng(0).integers(0, 5, (2, 3, 7, 8)).astype(np.float32)  # many ties
    want_v, want_i = _max_pool2d_ref(x, k, s, p, d, ceil)
    v, i = ops.max_pool2d(spora.Tensor(x), k, s, p, d, return_indices=True, ceil_mode=ceil)
    assert i.dtype == spora.int64
    np.testing.assert_array_equal(v.asnumpy(), want_v)
    np.testing.assert_array_equal(i.asnumpy(), want_i)
    with pytest.raises(ValueError, match=r"\[max_pool2d\] x must have rank 4"):
        ops.max_pool2d(spora.Tensor(x[0]), k, return_indices=True)
