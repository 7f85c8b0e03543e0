"""A device without kernels for some ops still runs them: through the op's
decomposition on the same device, or on cpu with copies. ctest runs this with
SPORA_SIM_DISABLE_OPS set, so the sim plugin refuses those ops like a vendor
plugin with a partial op set would."""
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap

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
    ("conv2d", [(1, 2, 5, 5), (3, 2, 3, 3)], None),  # no decomposition: cpu with copies
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


def _cnn(dev, vals):
    """conv2d (no kernel on sim, no decomposition) -> relu (decomposed) ->
    softmax (cpu) -> mul by 2 (sim), compiled for `dev` and run."""
    g = S.Graph("placed")
    x = g.input("x", S.DTYPE_F32, [2, 3, 6, 6])
    w = g.weight("w", S.DTYPE_F32, [4, 3, 3, 3])
    c = g.op("conv2d", [x, w], {"padding": [1, 1]}, file="model.py", line=3)[0]
    r = g.op("relu", [c], file="model.py", line=4)[0]
    s = g.op("reshape", [r], {"shape": [2, -1]})[0]
    p = g.op("softmax", [s], {"axis": -1}, file="model.py", line=5)[0]
    y = g.op("mul", [p, p], file="model.py", line=6)[0]
    g.set_outputs([y, c])
    exe = g.compile(dev)
    outs = exe.run([S.Tensor.from_numpy(dev, v) for v in vals], 2)
    assert all(o.device == dev for o in outs)
    return [o.numpy() for o in outs]


def _cnn_values():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((2, 3, 6, 6)).astype(np.float32),
            rng.standard_normal((4, 3, 3, 3)).astype(np.float32)]


def test_compiled_graph_places_ops_without_kernel_or_decomposition_on_cpu(devs):
    # conv2d and softmax have no decomposition: the plan runs them on cpu
    # with copies, the rest on sim. Numbers equal the cpu device's.
    cpu, sim = devs
    assert {"conv2d", "softmax"} <= DISABLED, "ctest should disable conv2d and softmax on sim"
    vals = _cnn_values()
    got, want = _cnn(sim, vals), _cnn(cpu, vals)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_placed_plan_equals_the_all_sim_run(devs):
    # The same graph on a sim device that has every kernel (a fresh process
    # without SPORA_SIM_DISABLE_OPS): the placed plan computes the same numbers.
    _, sim = devs
    vals = _cnn_values()
    got = _cnn(sim, vals)
    code = textwrap.dedent("""
        import sys, numpy as np, spora_capi as S
        import test_fallback as T
        ctx = S.Context()
        outs = T._cnn(ctx.device_find("sim"), T._cnn_values())
        np.savez(sys.argv[1], *outs)
    """)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "all_sim.npz")
        env = dict(os.environ, SPORA_SIM_DISABLE_OPS="",
                   PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                               str(pathlib.Path(__file__).resolve().parents[1] / "python")]))
        r = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        want = np.load(path)
        for i, a in enumerate(got):
            np.testing.assert_allclose(a, want[f"arr_{i}"], rtol=1e-5, atol=1e-6)


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
