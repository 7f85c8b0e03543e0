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


def test_compiling_an_op_without_kernel_or_decomposition_names_it(devs):
    # softmax has no decomposition: compiling for a device without its
    # kernel is an error naming the op and the source line.
    _, sim = devs
    g = S.Graph("g")
    x = g.input("x", S.DTYPE_F32, [2, 3])
    g.set_outputs(g.op("softmax", [x], file="model.py", line=5))
    with pytest.raises(S.SporaError) as e:
        g.compile(sim)
    assert e.value.status == S.ERROR_UNIMPLEMENTED
    assert "[softmax]" in e.value.message and "model.py:5" in e.value.message


def test_compiled_graph_decomposes_ops_the_device_lacks(devs):
    # linear, relu and sigmoid are disabled on sim but have decompositions:
    # compilation places them as their parts (matmul, add, maximum, ...).
    cpu, sim = devs
    rng = np.random.default_rng(5)
    vals = [rng.standard_normal(s).astype(np.float32) for s in [(4, 6), (5, 6), (5,)]]
    results = []
    for dev in (cpu, sim):
        g = S.Graph("decomposed")
        x = g.input("x", S.DTYPE_F32, [4, 6])
        w = g.weight("w", S.DTYPE_F32, [5, 6])
        b = g.weight("b", S.DTYPE_F32, [5])
        h = g.op("relu", [g.op("linear", [x, w, b])[0]])[0]
        g.set_outputs([g.op("sigmoid", [h])[0]])
        exe = g.compile(dev)
        out = exe.run([S.Tensor.from_numpy(dev, v) for v in vals], 1)[0]
        assert out.device == dev
        results.append(out.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)


def test_without_fallback_only_the_plugins_own_kernels_run(devs):
    # spora_device_set_fallback(sim, 0), as `spora plugin check` uses it: an
    # op sim refuses fails UNIMPLEMENTED with sim's reason, eagerly (relu has
    # a decomposition, softmax runs on cpu otherwise) and when compiling
    # (linear would be decomposed); ops sim has kernels for still run; turned
    # back on, the disabled op runs again.
    cpu, sim = devs
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    sim.set_fallback(False)
    try:
        for op in ("relu", "softmax"):
            with pytest.raises(S.SporaError) as e:
                _run(sim, op, [x])
            assert e.value.status == S.ERROR_UNIMPLEMENTED
            assert f"[{op}]" in e.value.message and "SPORA_SIM_DISABLE_OPS" in e.value.message
        g = S.Graph("g")
        a = g.input("a", S.DTYPE_F32, [3, 4])
        w = g.weight("w", S.DTYPE_F32, [5, 4])
        b = g.weight("b", S.DTYPE_F32, [5])
        g.set_outputs(g.op("linear", [a, w, b], file="model.py", line=9))
        with pytest.raises(S.SporaError) as e:
            g.compile(sim)
        assert e.value.status == S.ERROR_UNIMPLEMENTED
        assert "[linear]" in e.value.message and "model.py:9" in e.value.message
        np.testing.assert_allclose(_run(sim, "add", [x, x]), 2 * x)
    finally:
        sim.set_fallback(True)
    np.testing.assert_allclose(_run(sim, "relu", [x]), np.maximum(x, 0))
    with pytest.raises(S.SporaError) as e:
        S.call("spora_device_set_fallback", sim.handle, 2)
    assert e.value.status == S.ERROR_INVALID_ARGUMENT


def test_tape_records_the_op_not_its_fallback(devs):
    # On sim, linear and relu run as decompositions and softmax on cpu with
    # copies; the tape records the ops as called, and its gradients (whose
    # backward ops fall back the same way) equal cpu's.
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in [(4, 6), (5, 6), (5,)]]
    grads, texts = {}, {}
    for dev in devs:
        x, w, b = [S.Tensor.from_numpy(dev, a) for a in arrays]
        tape = S.Tape()
        tape.watch(w)
        with tape:
            y = S.run("softmax", S.run("relu", S.run("linear", x, w, b)), axis=-1)
            loss = S.run("sum", S.run("mul", y, y))
        grads[dev.name] = [g.numpy() for g in tape.gradient(loss, [x, w, b])]
        texts[dev.name] = tape.graph([loss]).text()
    assert texts["cpu:0"] == texts["sim:0"]
    assert [ln.split("=")[1].split("(")[0].strip() for ln in texts["sim:0"].splitlines() if "(" in ln] == \
        ["linear", "relu", "softmax", "mul", "sum"]
    for got, want in zip(grads["sim:0"], grads["cpu:0"]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
