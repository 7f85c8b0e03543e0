"""The optimizer ops on a device without their fused kernels (ctest disables
them on sim): eager calls and compiled graphs run their decompositions into
elementwise ops (OpDef::decompose in core/src/ops/optim.cpp), which must agree with
the cpu's fused kernels, f16 params with f32 state included."""
import os

import numpy as np
import pytest

import spora_capi as S

OPS = ("sgd_update", "adam_update", "global_norm", "clip_by_global_norm")
DISABLED = set(filter(None, os.environ.get("SPORA_SIM_DISABLE_OPS", "").split(",")))
pytestmark = pytest.mark.skipif(not set(OPS) <= DISABLED, reason="needs SPORA_SIM_DISABLE_OPS with the optimizer ops")

SHAPES = [(6, 5), (5,), ()]


@pytest.fixture(scope="module")
def devs():
    ctx = S.Context()
    yield ctx.device_find("cpu"), ctx.device_find("sim")


def T(dev, a):
    a = np.asarray(a)
    return S.Tensor.from_numpy(dev, np.ascontiguousarray(a) if a.ndim else a.copy())


def _inputs(op, attrs, pdt, step, rng):
    sdt = np.float32 if pdt == np.float16 else pdt
    params = [rng.standard_normal(s).astype(pdt) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(pdt) for s in SHAPES]
    if op == "sgd_update":
        bufs = [rng.standard_normal(s).astype(sdt) for s in SHAPES] if attrs.get("momentum", 0) > 0 else []
        return [np.float32(0.1), np.float32(0.8)] + params + grads + bufs
    if op == "adam_update":
        states = [rng.standard_normal(s).astype(sdt) for s in SHAPES]
        states += [np.abs(rng.standard_normal(s)).astype(sdt) for _ in range(2 if attrs.get("amsgrad") else 1)
                   for s in SHAPES]
        return [np.float32(0.01), np.int64(step), np.float32(1.0)] + params + grads + states
    return grads


CASES = [
    ("sgd_update", {}, 1),
    ("sgd_update", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, 1),
    ("sgd_update", {"momentum": 0.5, "dampening": 0.2}, 1),
    ("adam_update", {"weight_decay": 0.01}, 3),
    ("adam_update", {"weight_decay": 0.1, "decoupled": True, "amsgrad": True, "beta1": 0.8}, 7),
    ("adam_update", {}, 0),  # step 0: NaN params on both paths
    ("global_norm", {}, 1),
    ("clip_by_global_norm", {"max_norm": 0.5}, 1),
    ("clip_by_global_norm", {"max_norm": 1e3}, 1),
]


def _n_out(op, attrs):
    n = len(SHAPES)
    if op == "sgd_update":
        return 2 * n if attrs.get("momentum", 0) > 0 else n
    if op == "adam_update":
        return (4 if attrs.get("amsgrad") else 3) * n
    return 1 if op == "global_norm" else n + 1


@pytest.mark.parametrize("pdt", [np.float32, np.float64, np.float16], ids=["f32", "f64", "f16"])
@pytest.mark.parametrize("op,attrs,step", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_decomposition_matches_fused_kernel(devs, op, attrs, step, pdt):
    cpu, sim = devs
    arrays = _inputs(op, attrs, pdt, step, np.random.default_rng(11))
    n_out = _n_out(op, attrs)
    want = [t.numpy() for t in S.op_call(op, [T(cpu, a) for a in arrays], attrs or None, num_outputs=n_out)]
    eager = [t.numpy() for t in S.op_call(op, [T(sim, a) for a in arrays], attrs or None, num_outputs=n_out)]
    g = S.Graph("update")
    vals = [g.input(f"x{i}", {np.dtype(np.float32): S.DTYPE_F32, np.dtype(np.float64): S.DTYPE_F64,
                              np.dtype(np.float16): S.DTYPE_F16, np.dtype(np.int64): S.DTYPE_I64}[np.asarray(a).dtype],
                    list(np.shape(a))) for i, a in enumerate(arrays)]
    g.set_outputs(g.op(op, vals, attrs or None))
    compiled = [t.numpy() for t in g.compile(sim).run([T(sim, a) for a in arrays], n_out)]
    rtol, atol = {np.float32: (1e-5, 1e-6), np.float64: (1e-12, 1e-14), np.float16: (2e-3, 2e-3)}[pdt]
    for i, w in enumerate(want):
        for name, got in (("eager", eager[i]), ("compiled", compiled[i])):
            np.testing.assert_allclose(got, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{name} output {i}")
    if op == "adam_update" and step == 0:
        assert np.isnan(want[0]).all() and np.isnan(compiled[0]).all()


def test_call_into_without_the_kernel_copies_the_decomposition_results(devs):
    """spora_op_call_into on a device without the fused kernel: the results
    are computed by the decomposition and copied into the given tensors,
    params and buffers updated in place."""
    cpu, sim = devs
    rng = np.random.default_rng(12)
    arrays = _inputs("sgd_update", {"momentum": 0.9}, np.float32, 1, rng)
    n = len(SHAPES)
    want = [t.numpy() for t in S.op_call("sgd_update", [T(cpu, a) for a in arrays], {"momentum": 0.9},
                                         num_outputs=2 * n)]
    ts = [T(sim, a) for a in arrays]
    outs = ts[2:2 + n] + ts[2 + 2 * n:]
    S.op_call_into("sgd_update", ts, outs, {"momentum": 0.9})
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=1e-6)
