"""Gradient checks of every differentiable op: autodiff (spora_graph_grad)
against central finite differences in float64, on the f64 cases of
sdk/conformance/cases, through compiled graphs on cpu. Elementwise unary ops
also get a second-order check (grad of grad). Fails when an op has no
gradient rule, or a differentiable op has no f64 case to check."""
import numpy as np
import pytest

import harness as H
import spora_capi as S

# Small cases only: with many elements one probe's change to L drowns in
# rounding of the sum.
MAX_ELEMENTS = 4096
CASES = [c for c in H.load_cases()
         if c["dtype"] == "f64" and all(int(np.prod(i["shape"])) <= MAX_ELEMENTS for i in c["inputs"])]
# Smooth elementwise ops, from the op table (ops_elementwise.def).
SECOND_ORDER = {r["name"] for r in H.elementwise_table() if "smooth" in r["flags"]}
MAX_PROBES = 8  # finite-difference probes per input


def _rule(op):
    return S.op_gradient(op)


DIFF_CASES = [c for c in CASES if _rule(c["op"]) == (True, True)]


@pytest.fixture(scope="module")
def cpu():
    ctx = S.Context()
    yield ctx.device_find("cpu")


def _build(case, device, rng):
    """The op inside a graph whose output is a random weighting of its float
    outputs: L = sum_j sum(y_j * r_j). Returns (graph, float input values,
    their numpy values, the bound tensors)."""
    g = S.Graph(case["op"])
    wrt, vals, bound = [], [], []
    inputs = []
    for i, spec in enumerate(case["inputs"]):
        v, store, dt = H.make_input(spec, case["dtype"], rng)
        if dt == "f64":
            val = g.input(f"x{i}", S.DTYPE_F64, list(v.shape))
            wrt.append(val)
            vals.append(v)
            bound.append(H.to_spora(device, store, dt))
        else:
            val = g.constant(H.to_spora(device, store, dt))
        inputs.append(val)
    outs = g.op(case["op"], inputs, case.get("attrs") or None)
    loss = None
    for j, y in enumerate(outs):
        dt, shape = g.value_type(y)
        if dt != S.DTYPE_F64:
            continue
        r = rng.standard_normal(shape) if shape else np.array(rng.standard_normal())
        term = g.op("sum", [g.op("mul", [y, g.constant(H.to_spora(device, np.asarray(r, np.float64), "f64"))])[0]])[0]
        loss = term if loss is None else g.op("add", [loss, term])[0]
    return g, loss, wrt, vals, bound


def _loss_fn(g, device, vals):
    exe = g.compile(device)

    def f(xs):
        ts = [H.to_spora(device, np.asarray(x, np.float64), "f64") for x in xs]
        return float(exe.run(ts, 1)[0].numpy())

    return f


def _check(analytic, f, vals, rng, what):
    for i, (x, ga) in enumerate(zip(vals, analytic)):
        if x.size == 0:
            continue
        flat = x.reshape(-1)
        probes = rng.choice(flat.size, size=min(MAX_PROBES, flat.size), replace=False)
        for p in probes:
            eps = 1e-6 * max(1.0, abs(flat[p]))
            plus = [v.copy() for v in vals]
            minus = [v.copy() for v in vals]
            plus[i].reshape(-1)[p] += eps
            minus[i].reshape(-1)[p] -= eps
            f0, fp, fm = f(vals), f(plus), f(minus)
            fd = (fp - fm) / (2 * eps)
            an = ga.reshape(-1)[p]
            # Not differentiable here (a tie, a kink at an integer input,
            # outside the domain): the one-sided slopes disagree or are not
            # finite. Such points have no gradient to check.
            right, left = (fp - f0) / eps, (f0 - fm) / eps
            if not np.isfinite([fd, right, left]).all() or abs(right - left) > 1e-3 * max(1.0, abs(fd)):
                continue
            assert abs(fd - an) <= 1e-6 + 1e-4 * max(abs(fd), abs(an)), \
                f"{what}: d/dx{i}[{p}] autodiff {an!r} vs finite difference {fd!r}"


@pytest.mark.parametrize("case", DIFF_CASES, ids=[c["id"] for c in DIFF_CASES])
def test_gradient_matches_finite_differences(cpu, case):
    rng = np.random.default_rng(7)
    g, loss, wrt, vals, bound = _build(case, cpu, rng)
    if loss is None or not wrt:
        pytest.skip("no float64 input or output to differentiate")
    g.set_outputs([loss])
    gg = g.grad(wrt)
    grads = [t.numpy() for t in gg.compile(cpu).run(bound, 1 + len(wrt))[1:]]
    _check(grads, _loss_fn(g, cpu, vals), vals, rng, case["id"])


SECOND = [c for c in DIFF_CASES if c["op"] in SECOND_ORDER and len(c["inputs"]) == 1]


@pytest.mark.parametrize("case", SECOND, ids=[c["id"] for c in SECOND])
def test_second_order_matches_finite_differences(cpu, case):
    rng = np.random.default_rng(11)
    g, loss, wrt, vals, bound = _build(case, cpu, rng)
    g.set_outputs([loss])
    gg = g.grad(wrt)
    # L2 = sum(dL/dx * r2), differentiated again.
    dx = gg.outputs()[1]
    _, shape = gg.value_type(dx)
    r2 = np.asarray(rng.standard_normal(shape), np.float64)
    l2 = gg.op("sum", [gg.op("mul", [dx, gg.constant(H.to_spora(cpu, r2, "f64"))])[0]])[0]
    gg.set_outputs([l2])
    g3 = gg.grad(wrt)
    second = [g3.compile(cpu).run(bound, 2)[1].numpy()]
    _check(second, _loss_fn(gg, cpu, vals), vals, rng, case["id"] + " (second order)")


def test_every_op_has_a_gradient_rule():
    missing = [op for op in S.op_names() if not _rule(op)[0]]
    assert not missing, f"ops without a gradient rule or a not-differentiable mark (core/src/autodiff): {missing}"


def test_every_differentiable_op_has_a_gradcheck():
    checked = {c["op"] for c in DIFF_CASES}
    missing = [op for op in S.op_names() if _rule(op) == (True, True) and op not in checked]
    assert not missing, f"differentiable ops without an f64 case to gradcheck (sdk/conformance/cases): {missing}"
