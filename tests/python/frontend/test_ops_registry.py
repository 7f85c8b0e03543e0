"""Every op of the registry is reachable from spora.ops and computes what the
C API computes.

The test enumerates the registry (spora_op_count / spora_op_schema), and for
each op runs one conformance case (sdk/conformance/cases) through
spora.ops.raw.<op> and through the ctypes C-API binding on the same inputs:
the outputs must be identical."""
import pathlib
import sys

import numpy as np
import pytest

import spora
from spora import _C

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "backend"))
import harness  # noqa: E402  (tests/backend: case loading and the C-API reference run)
import spora_capi as S  # noqa: E402

OPS = _C.op_names()
PREFERRED = ["f32", "f64", "i32", "i64", "u8", "bool", "f16"]


def _case_per_op():
    by_op = {}
    for c in harness.load_cases():
        if c["dtype"] == "bf16" or any(i.get("dtype") == "bf16" for i in c["inputs"]):
            continue
        best = by_op.get(c["op"])
        if best is None or PREFERRED.index(c["dtype"]) < PREFERRED.index(best["dtype"]):
            by_op[c["op"]] = c
    return by_op


CASES = _case_per_op()
CTX = S.Context()
CPU = CTX.device_find("cpu")


def test_registry_is_enumerated():
    assert len(OPS) >= 100
    for name in OPS:
        fn = getattr(spora.ops.raw, name)
        assert callable(fn) and fn.op == name
        assert fn.__doc__.startswith(_C.op_schema(name))
        assert hasattr(spora.ops, name), name
        assert name in spora.ops.__all__


def test_schema_attrs_are_exposed():
    s = spora.ops.raw.conv2d.schema
    assert s.inputs == ["x", "w"] and [a[0] for a in s.attrs][:3] == ["stride", "padding", "pad_mode"]
    assert spora.ops.raw.split.schema.dynamic_out
    assert spora.ops.raw.concat.schema.variadic


@pytest.mark.parametrize("op", OPS)
def test_every_op_matches_the_c_api(op):
    case = CASES.get(op)
    assert case is not None, f"no conformance case for {op}"
    rng = np.random.default_rng(0)
    stores = [harness.make_input(spec, case["dtype"], rng)[1] for spec in case["inputs"]]
    _, want = harness.run(case, CPU)
    attrs = dict(case.get("attrs") or {})
    fn = getattr(spora.ops.raw, op)
    ins = [spora.Tensor(np.array(s)) for s in stores]
    if fn.schema.dynamic_out and "sizes" not in attrs and "sections" not in attrs:
        pytest.skip("split without sizes")
    if fn.schema.variadic:
        out = fn(ins, **attrs)
    elif not fn.schema.inputs:
        out = fn(device="cpu", **attrs)
    else:
        out = fn(*ins, **attrs)
    outs = out if isinstance(out, tuple) else (out,)
    assert len(outs) == len(want)
    for o, w in zip(outs, want):
        got = o.asnumpy()
        got = got.astype(np.float64) if got.dtype.kind == "f" else got
        assert got.shape == w.shape
        np.testing.assert_array_equal(got, w, err_msg=op)


def test_scalars_become_tensors_of_the_other_dtype():
    x = spora.Tensor(np.array([1.0, 2.0], np.float64))
    r = spora.ops.raw.add(x, 1)
    assert r.dtype == spora.float64
    np.testing.assert_array_equal(r.asnumpy(), [2.0, 3.0])
    np.testing.assert_array_equal(spora.ops.raw.maximum(0.5, x).asnumpy(), [1.0, 2.0])


def test_friendly_conv_pool_and_losses_vs_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    y = spora.ops.conv2d(spora.Tensor(x), spora.Tensor(w), spora.Tensor(b), padding=1).asnumpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 6, 6), np.float64)
    for i in range(6):
        for j in range(6):
            want[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + 3, j:j + 3], w)
    np.testing.assert_allclose(y, want + b[None, :, None, None], rtol=1e-4, atol=1e-4)
    p = spora.ops.max_pool2d(spora.Tensor(x), 2).asnumpy()
    np.testing.assert_array_equal(p, x.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)))
    a = spora.ops.avg_pool2d(spora.Tensor(x), kernel_size=2, stride=2).asnumpy()
    np.testing.assert_allclose(a, x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)), rtol=1e-6)
    logits = rng.standard_normal((5, 4))
    t = rng.integers(0, 4, 5)
    ce = spora.ops.cross_entropy(spora.Tensor(logits), spora.Tensor(t)).item()
    lsm = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert ce == pytest.approx(-lsm[np.arange(5), t].mean(), rel=1e-10)
    xm, wm = x[0, 0], x[1, 1, :3]  # (6, 6) and (3, 6)
    lin = spora.ops.linear(spora.Tensor(xm), spora.Tensor(wm), spora.Tensor(b[:3])).asnumpy()
    np.testing.assert_allclose(lin, xm @ wm.T + b[:3], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(spora.ops.linear(spora.Tensor(xm), spora.Tensor(wm)).asnumpy(),
                               xm @ wm.T, rtol=1e-5, atol=1e-5)


def test_friendly_layout_and_creation():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = spora.Tensor(a)
    np.testing.assert_array_equal(spora.ops.concat([t, t], axis=1).asnumpy(), np.concatenate([a, a], 1))
    np.testing.assert_array_equal(spora.ops.stack([t, t]).asnumpy(), np.stack([a, a]))
    parts = spora.ops.split(t, 3, axis=1)
    assert [p.shape for p in parts] == [(3, 3), (3, 1)]
    np.testing.assert_array_equal(parts[1].asnumpy(), a[:, 3:])
    np.testing.assert_array_equal(spora.ops.where(t > 5, t, 0.0).asnumpy(), np.where(a > 5, a, 0))
    np.testing.assert_array_equal(spora.ops.arange(5).asnumpy(), np.arange(5))
    assert spora.ops.arange(0, 1, 0.25).dtype == spora.float32
    np.testing.assert_array_equal(spora.zeros((2, 3), spora.int32).asnumpy(), np.zeros((2, 3), np.int32))
    np.testing.assert_array_equal(spora.ones(3).asnumpy(), np.ones(3))
    np.testing.assert_array_equal(spora.full((2,), 7.0).asnumpy(), [7.0, 7.0])
    np.testing.assert_array_equal(spora.eye(3).asnumpy(), np.eye(3))
    np.testing.assert_array_equal(spora.ops.one_hot(spora.Tensor([0, 2]), 3).asnumpy(), np.eye(3)[[0, 2]])
    u = spora.ops.uniform((1000,), seed=5).asnumpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    v, i = spora.ops.topk(t, 2)
    np.testing.assert_array_equal(v.asnumpy(), a[:, :1:-1])


def test_scalar_takes_the_value_dtype_not_the_mask_dtype():
    x = spora.Tensor(np.array([1.0, -2.0]))  # float64
    r = spora.ops.raw.where(x > 0, x, 0.0)
    assert r.dtype == spora.float64
    np.testing.assert_array_equal(r.asnumpy(), [1.0, 0.0])


def test_generated_signatures():
    import inspect
    sig = inspect.signature(spora.ops.raw.conv2d)
    assert list(sig.parameters)[:2] == ["x", "w"]
    assert sig.parameters["stride"].default == [1, 1] and sig.parameters["pad_mode"].default == "explicit"
    assert inspect.signature(spora.ops.raw.dropout).parameters["seed"].default is inspect.Parameter.empty
    assert "device" in inspect.signature(spora.ops.raw.zeros).parameters
