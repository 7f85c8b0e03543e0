"""MindSpore's spellings of the reduction arguments (issue 20 line 4): keep_dims= (mindspore.ops.mean,
prod, logsumexp; Tensor.mean, prod, all, any), keepdim= and dim= (ops.sum, argmax, argmin) give what
Spora's keepdims= / axis= give; both spellings at once is an error naming the op."""
import numpy as np
import pytest

import spora
from spora import ops

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7.0
B = X > 1.5


def same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for u, v in zip(a, b):
            same(u, v)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "var",
                                  "std", "logsumexp"])
@pytest.mark.parametrize("spelling", ["keep_dims", "keepdim"])
def test_functional_spellings(name, spelling):
    x = spora.Tensor(X)
    f = getattr(ops, name)
    want = f(x, axis=1, keepdims=True)
    same(f(x, 1, **{spelling: True}), want)
    same(f(x, dim=1, **{spelling: True}), want)
    assert tuple((want[0] if isinstance(want, tuple) else want).shape) == (2, 1, 4)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin",
                                  "logsumexp", "all", "any"])
def test_tensor_method_spellings(name):
    x = spora.Tensor(B if name in ("all", "any") else X)
    want = getattr(x, name)(axis=2, keepdims=True)
    assert tuple(want.shape) == (2, 3, 1)
    same(getattr(x, name)(2, keep_dims=True), want)
    same(getattr(x, name)(dim=2, keepdim=True), want)
    same(getattr(x, name)(2, keep_dims=False), getattr(x, name)(2))


def test_mindspore_mean_and_prod_calls_as_written():
    x = spora.Tensor(X)
    np.testing.assert_allclose(ops.mean(x, axis=(0, 2), keep_dims=True).asnumpy(), X.mean((0, 2), keepdims=True),
                               rtol=1e-6)
    np.testing.assert_allclose(x.prod(axis=0, keep_dims=True).asnumpy(), X.prod(0, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(ops.argmax(x, dim=-1, keepdim=True).asnumpy(), X.argmax(-1)[..., None])


def test_spellings_trace_in_jit():
    @spora.jit
    def f(x):
        return ops.mean(x, 1, keep_dims=True) + x.sum(dim=1, keepdim=True)

    np.testing.assert_allclose(f(spora.Tensor(X)).asnumpy(), X.mean(1, keepdims=True) + X.sum(1, keepdims=True),
                               rtol=1e-6)


def test_both_spellings_is_an_error():
    x = spora.Tensor(X)
    with pytest.raises(TypeError, match=r"\[mean\] got both keepdims= and keep_dims="):
        ops.mean(x, 1, keepdims=True, keep_dims=True)
    with pytest.raises(TypeError, match=r"\[sum\] got both axis= and dim="):
        x.sum(axis=0, dim=1)


def test_ops_all_any_as_mindspore_writes_them():
    b = np.array([[True, False, True], [True, True, True]])
    x = spora.Tensor(b)
    np.testing.assert_array_equal(ops.all(x).asnumpy(), b.all())
    np.testing.assert_array_equal(ops.all(x, 1).asnumpy(), b.all(1))
    np.testing.assert_array_equal(ops.any(x, axis=0, keep_dims=True).asnumpy(), b.any(0, keepdims=True))
    np.testing.assert_array_equal(ops.all(spora.Tensor(np.array([1.0, 0.0], np.float32))).asnumpy(), False)
    with pytest.raises(TypeError, match=r"\[all\] input takes a tensor"):
        ops.all("yes")
    # Python's own all / any are not replaced by a star import.
    ns = {}
    exec("from spora.ops import *", ns)
    assert "all" not in ns and "any" not in ns and "tensor_scatter_add" in ns
