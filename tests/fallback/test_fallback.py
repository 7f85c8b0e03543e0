"""A device without kernels for some ops still runs them: through the op's
decomposition on the same device, or on cpu with copies. ctest runs this with
SPORA_SIM_DISABLE_OPS set, so the sim plugin refuses those ops like a vendor
plugin with a partial op set would."""
import os

import numpy as np
import pytest

import spora_capi as S

DISABLED = set(filter(None, os.environ.get("SPORA_SIM_DISABLE_OPS", "").split(",")))
pytestmark = pytest.mark.skipif(not DISABLED, reason="needs SPORA_SIM_DISABLE_OPS (ctest sets it)")


@pytest.fixture(scope="module")
def devs():
    ctx = S.Context()
    yield ctx.device_find("cpu"), ctx.device_find("sim")


def _run(dev, op, arrays, attrs=None):
    ts = [S.Tensor.from_numpy(dev, a) for a in arrays]
    out = S.op_call(op, ts, attrs)[0]
    assert out.device == dev  # the result lives where the op was asked to run
    return out.numpy()


CASES = [
    ("linear", [(4, 6), (5, 6), (5,)], None),    # decomposed: matmul + add
    ("relu", [(3, 7)], None),                     # decomposed: maximum
    ("silu", [(2, 9)], None),                     # decomposed: mul + sigmoid
    ("sigmoid", [(10,)], None),                   # decomposed: div, add, exp, neg
    ("mean", [(3, 4, 5)], {"axes": [1]}),         # decomposed: sum + div
    ("softmax", [(2, 8)], {"axis": -1}),          # no decomposition: cpu with copies
    ("log_softmax", [(2, 8)], {"axis": 0}),       # no decomposition: cpu with copies
]


@pytest.mark.parametrize("op,shapes,attrs", CASES, ids=[c[0] for c in CASES])
def test_disabled_op_matches_cpu(devs, op, shapes, attrs):
    assert op in DISABLED, f"ctest should disable {op} on sim"
    cpu, sim = devs
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = _run(cpu, op, arrays, attrs)
    got = _run(sim, op, arrays, attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_graph_mode_uses_the_same_fallback_for_eager_only(devs):
    # Graph compilation asks the device for every kernel up front: a missing
    # one is an error naming the op (placement by capability is the
    # scheduler's job, not yet done).
    _, sim = devs
    g = S.Graph("g")
    x = g.input("x", S.DTYPE_F32, [2, 3])
    g.set_outputs(g.op("softmax", [x], file="model.py", line=5))
    with pytest.raises(S.SporaError) as e:
        g.compile(sim)
    assert e.value.status == S.ERROR_UNIMPLEMENTED
    assert "[softmax]" in e.value.message and "model.py:5" in e.value.message
