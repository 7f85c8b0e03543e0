"""Control flow through the C API (spora_graph_add_if / spora_graph_add_while):
both branches and loops on every device, compiled and eager, against numpy;
nesting; JSON round trips; gradients against float64 finite differences; the
runaway-loop guard; type errors naming [if]/[while] and the source line."""
import numpy as np
import pytest

import spora_capi as S

CTX = S.Context()
DEVICES = [d.name for d in CTX.devices()]
F32, F64, I64, BOOL = S.DTYPE_F32, S.DTYPE_F64, S.DTYPE_I64, S.DTYPE_BOOL
HOST = CTX.device_find("cpu")


@pytest.fixture(params=DEVICES)
def dev(request):
    return CTX.device_find(request.param)


def op1(g, name, inputs, attrs=None):
    (out,) = g.op(name, inputs, attrs)
    return out


def const(g, value, dtype=np.float32):
    return g.constant(S.Tensor.from_numpy(HOST, np.asarray(value, dtype)))


def run(g, dev, arrays, n):
    """Runs compiled and eagerly; both must give the same bytes."""
    params = [S.Tensor.from_numpy(dev, np.asarray(a)) for a in arrays]
    exe = g.compile(dev)
    got = [t.numpy() for t in exe.run(params, n)]
    eager = [t.numpy() for t in g.run_eager(dev, params, n)]
    for a, b in zip(got, eager):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return got


def expect_error(status, fragments, fn, *args, **kwargs):
    with pytest.raises(S.SporaError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.status == status, f"status {err.status}, want {status}: {err.message}"
    for f in fragments:
        assert f in err.message, f"{f!r} not in {err.message!r}"
    return err


# -- if ---------------------------------------------------------------------

def branches(dtype=F32, npdt=np.float32, shape=(2, 3)):
    then_g = S.Graph("then")
    x = then_g.input("x", dtype, shape)
    y = then_g.input("y", dtype, shape)
    then_g.set_outputs([op1(then_g, "mul", [x, y]), op1(then_g, "sum", [x])])
    else_g = S.Graph("else")
    x = else_g.input("x", dtype, shape)
    y = else_g.input("y", dtype, shape)
    else_g.set_outputs([op1(else_g, "sub", [x, const(else_g, 1, npdt)]), op1(else_g, "max", [y])])
    return then_g, else_g


def test_if_runs_each_branch(dev):
    then_g, else_g = branches()
    g = S.Graph("if")
    c = g.input("c", BOOL, ())
    x = g.input("x", F32, (2, 3))
    y = g.input("y", F32, (2, 3))
    outs = g.if_else(c, then_g, else_g, [x, y], file="model.py", line=3)
    assert len(outs) == 2
    assert g.value_type(outs[0]) == (F32, (2, 3)) and g.value_type(outs[1]) == (F32, ())
    g.set_outputs([op1(g, "exp", [outs[0]]), outs[1]])
    r = np.random.default_rng(0)
    xv = r.standard_normal((2, 3)).astype(np.float32)
    yv = r.standard_normal((2, 3)).astype(np.float32)
    for cond in (True, False):
        a, b = run(g, dev, [np.array(cond), xv, yv], 2)
        if cond:
            np.testing.assert_allclose(a, np.exp(xv * yv), rtol=1e-6)
            np.testing.assert_allclose(b, xv.sum(), rtol=1e-6)
        else:
            np.testing.assert_allclose(a, np.exp(xv - 1), rtol=1e-6)
            assert b == yv.max()


def test_if_on_a_computed_condition_and_the_branch_is_an_input(dev):
    # The then branch returns its input unchanged; the condition is data.
    then_g = S.Graph("then")
    then_g.set_outputs([then_g.input("x", F32, (3,))])
    else_g = S.Graph("else")
    ex = else_g.input("x", F32, (3,))
    else_g.set_outputs([op1(else_g, "neg", [ex])])
    g = S.Graph()
    x = g.input("x", F32, (3,))
    c = op1(g, "greater", [op1(g, "sum", [x]), const(g, 0)])
    g.set_outputs(g.if_else(c, then_g, else_g, [x]))
    for xv in ([1, 2, -0.5], [-1, -2, 0.5]):
        xv = np.array(xv, np.float32)
        (got,) = run(g, dev, [xv], 1)
        np.testing.assert_array_equal(got, xv if xv.sum() > 0 else -xv)


# -- while ------------------------------------------------------------------

def doubling_loop(line=12):
    """x * 2 until sum(x) > 100, counting the iterations."""
    cond = S.Graph("cond")
    cx = cond.input("x", F32, (4,))
    cond.input("n", I64, ())
    cond.set_outputs([op1(cond, "less_equal", [op1(cond, "sum", [cx]), const(cond, 100)])])
    body = S.Graph("body")
    bx = body.input("x", F32, (4,))
    bn = body.input("n", I64, ())
    body.set_outputs([op1(body, "mul", [bx, const(body, 2)]), op1(body, "add", [bn, const(body, 1, np.int64)])])
    g = S.Graph("loop")
    x = g.input("x", F32, (4,))
    outs = g.while_loop(cond, body, [x, const(g, 0, np.int64)], file="loop.py", line=line)
    g.set_outputs(outs)
    return g


@pytest.mark.parametrize("start", [[1, 2, 3, 4], [0.5, 0, 0, 0], [100, 1, 0, 0], [-3, 1, 2, 0.25]])
def test_while_doubles_until_the_sum_exceeds_100(dev, start):
    g = doubling_loop()
    want, n = np.array(start, np.float32), 0
    while want.sum() <= 100:
        want, n = want * 2, n + 1
    x, count = run(g, dev, [np.array(start, np.float32)], 2)
    np.testing.assert_array_equal(x, want)
    assert count == n


def test_while_many_iterations_reuses_its_buffers(dev):
    # 20000 iterations of a counter: the compiled loop allocates nothing per
    # iteration (carried values ping-pong between two buffer sets) and the
    # eager one frees each iteration's values as they are replaced.
    cond = S.Graph("cond")
    ci = cond.input("i", I64, ())
    cond.input("acc", F64, (64,))
    cond.set_outputs([op1(cond, "less", [ci, const(cond, 20000, np.int64)])])
    body = S.Graph("body")
    bi = body.input("i", I64, ())
    ba = body.input("acc", F64, (64,))
    body.set_outputs([op1(body, "add", [bi, const(body, 1, np.int64)]), op1(body, "add", [ba, const(body, 0.5, np.float64)])])
    g = S.Graph()
    i = g.input("i", I64, ())
    a = g.input("acc", F64, (64,))
    g.set_outputs(g.while_loop(cond, body, [i, a]))
    i_end, acc = run(g, dev, [np.array(0, np.int64), np.zeros(64)], 2)
    assert i_end == 20000
    np.testing.assert_array_equal(acc, np.full(64, 10000.0))


def test_nested_control_flow(dev):
    # while i < 5: x = (sum(x) > 10) ? x - 3 : (x * 2 by a one-trip inner loop)
    icond = S.Graph("icond")
    icond.input("y", F32, (2,))
    ik = icond.input("k", I64, ())
    icond.set_outputs([op1(icond, "less", [ik, const(icond, 1, np.int64)])])
    ibody = S.Graph("ibody")
    iy = ibody.input("y", F32, (2,))
    ik2 = ibody.input("k", I64, ())
    ibody.set_outputs([op1(ibody, "add", [iy, iy]), op1(ibody, "add", [ik2, const(ibody, 1, np.int64)])])
    then_g = S.Graph("then")
    tx = then_g.input("x", F32, (2,))
    then_g.set_outputs([op1(then_g, "sub", [tx, const(then_g, 3)])])
    else_g = S.Graph("else")
    ex = else_g.input("x", F32, (2,))
    else_g.set_outputs(else_g.while_loop(icond, ibody, [ex, const(else_g, 0, np.int64)])[:1])
    cond = S.Graph("cond")
    cond.input("x", F32, (2,))
    ci = cond.input("i", I64, ())
    cond.set_outputs([op1(cond, "less", [ci, const(cond, 5, np.int64)])])
    body = S.Graph("body")
    bx = body.input("x", F32, (2,))
    bi = body.input("i", I64, ())
    big = op1(body, "greater", [op1(body, "sum", [bx]), const(body, 10)])
    body.set_outputs(body.if_else(big, then_g, else_g, [bx]) + [op1(body, "add", [bi, const(body, 1, np.int64)])])
    g = S.Graph("nested")
    x = g.input("x", F32, (2,))
    g.set_outputs(g.while_loop(cond, body, [x, const(g, 0, np.int64)])[:1])
    want = np.array([1, 1.5], np.float32)
    for _ in range(5):
        want = want - 3 if want.sum() > 10 else want * 2
    (got,) = run(g, dev, [np.array([1, 1.5], np.float32)], 1)
    np.testing.assert_array_equal(got, want)
    # The JSON round trip keeps every level, and the copy runs the same.
    j = g.json()
    back = S.Graph.from_json(j)
    assert back.json() == j
    assert back.text() == g.text()
    (again,) = run(back, dev, [np.array([1, 1.5], np.float32)], 1)
    np.testing.assert_array_equal(again, want)


def test_optimised_graphs_with_control_flow_still_run(dev):
    g = doubling_loop()
    g.optimize(2)
    x, n = run(g, dev, [np.array([1, 2, 3, 4], np.float32)], 2)
    np.testing.assert_array_equal(x, [16, 32, 48, 64])  # 10 -> 20 -> 40 -> 80 -> 160
    assert n == 4


# -- the runaway guard -------------------------------------------------------

def test_runaway_loop_is_stopped_naming_the_source_line(dev, monkeypatch):
    cond = S.Graph("cond")
    cx = cond.input("x", F32, (1,))
    cond.set_outputs([op1(cond, "greater", [cx, const(cond, -1)])])  # always true
    body = S.Graph("body")
    bx = body.input("x", F32, (1,))
    body.set_outputs([op1(body, "add", [bx, const(body, 1)])])
    g = S.Graph()
    x = g.input("x", F32, (1,))
    g.set_outputs(g.while_loop(cond, body, [x], file="train.py", line=99))
    xv = S.Tensor.from_numpy(dev, np.zeros(1, np.float32))
    monkeypatch.setenv("SPORA_MAX_WHILE_ITERATIONS", "25")
    exe = g.compile(dev)
    for fn in (lambda: exe.run([xv], 1), lambda: g.run_eager(dev, [xv], 1)):
        expect_error(S.ERROR_ABORTED, ["[while]", "25 iterations", "SPORA_MAX_WHILE_ITERATIONS", "(train.py:99)"], fn)
    # A bounded loop under the same limit is fine.
    monkeypatch.setenv("SPORA_MAX_WHILE_ITERATIONS", "3")
    x4, n = run(doubling_loop(), dev, [np.array([10, 10, 10, 10], np.float32)], 2)
    assert n == 2
    monkeypatch.setenv("SPORA_MAX_WHILE_ITERATIONS", "1")
    expect_error(S.ERROR_ABORTED, ["[while]", "(loop.py:12)"], run, doubling_loop(), dev,
                 [np.array([10, 10, 10, 10], np.float32)], 2)
    monkeypatch.setenv("SPORA_MAX_WHILE_ITERATIONS", "lots")
    expect_error(S.ERROR_INVALID_ARGUMENT, ["SPORA_MAX_WHILE_ITERATIONS='lots'"], exe.run, [xv], 1)


# -- build errors ------------------------------------------------------------

def test_type_mismatches_name_the_node_and_the_line():
    INVALID = S.ERROR_INVALID_ARGUMENT
    then_g, else_g = branches()
    g = S.Graph()
    c = g.input("c", BOOL, ())
    x = g.input("x", F32, (2, 3))
    y = g.input("y", F32, (2, 3))
    z = g.input("z", F64, (2, 3))
    expect_error(INVALID, ["[if]", "input 1 ('y') is f32 (2,3), the node passes f64 (2,3)", "(model.py:21)"],
                 g.if_else, c, then_g, else_g, [x, z], file="model.py", line=21)
    expect_error(INVALID, ["[if]", "condition must be a bool scalar", "(model.py:22)"],
                 g.if_else, x, then_g, else_g, [x, y], file="model.py", line=22)
    expect_error(INVALID, ["[if]", "takes 2 inputs, the node passes 1", "(model.py:23)"],
                 g.if_else, c, then_g, else_g, [x], file="model.py", line=23)
    one = S.Graph("one")
    one.set_outputs([op1(one, "sum", [one.input("x", F32, (2, 3))]), one.input("y", F32, (2, 3))])
    expect_error(INVALID, ["[if]", "output 0 is f32 () in the then graph but f32 (2,3) in the else graph",
                           "(model.py:24)"], g.if_else, c, one, then_g, [x, y], file="model.py", line=24)
    expect_error(INVALID, ["[if]", "capacity", "(model.py:25)"],
                 g.if_else, c, then_g, else_g, [x, y], file="model.py", line=25, capacity=1)
    # while: cond not bool, body changing a type, wrong count.
    body = S.Graph("body")
    body.set_outputs([op1(body, "cast", [body.input("x", F32, (2, 3))], {"dtype": "f64"})])
    cond = S.Graph("cond")
    cond.set_outputs([op1(cond, "sum", [cond.input("x", F32, (2, 3))])])
    good_cond = S.Graph("cond")
    good_cond.set_outputs([op1(good_cond, "greater", [op1(good_cond, "sum", [good_cond.input("x", F32, (2, 3))]),
                                                    const(good_cond, 0)])])
    expect_error(INVALID, ["[while]", "cond graph must return one bool scalar, it returns f32 ()", "(loop.py:5)"],
                 g.while_loop, cond, body, [x], file="loop.py", line=5)
    expect_error(INVALID, ["[while]", "loop-carried value 0 is f32 (2,3) but the body graph returns f64 (2,3)",
                           "(loop.py:6)"], g.while_loop, good_cond, body, [x], file="loop.py", line=6)
    expect_error(INVALID, ["[while]", "takes 1 inputs, the node passes 2", "(loop.py:7)"],
                 g.while_loop, good_cond, body, [x, y], file="loop.py", line=7)
    expect_error(INVALID, ["[while]", "does not belong", "(loop.py:8)"],
                 g.while_loop, good_cond, body, [12345 << 16], file="loop.py", line=8)
    # Failed calls leave the graph as it was: only the four inputs.
    assert "if(" not in g.text() and "while(" not in g.text()
    # NULL sub-graphs are argument errors, not crashes.
    outs = (S._i64 * 4)()
    n = S._size()
    status = S.lib.spora_graph_add_while(g.handle, None, body.handle, None, 0, None, 0, outs, 4, S.ctypes.byref(n))
    assert status == INVALID and "cond_graph" in S.last_error()


# -- gradients -----------------------------------------------------------------

def numeric_grad(g, dev, arrays, which, out=0, h=1e-6):
    exe = g.compile(dev)

    def f(arrs):
        ts = [S.Tensor.from_numpy(dev, a) for a in arrs]
        return exe.run(ts, len(g.outputs()))[out].numpy().sum()

    grad = np.zeros_like(arrays[which])
    for idx in np.ndindex(arrays[which].shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[which][idx] += h
        minus[which][idx] -= h
        grad[idx] = (f(plus) - f(minus)) / (2 * h)
    return grad


def test_gradient_of_if_matches_finite_differences(dev):
    # loss = sum(tanh(if sum(x) > 0 then x*x*w else sin(x)*w + w))
    then_g = S.Graph("then")
    tx, tw = then_g.input("x", F64, (2, 2)), then_g.input("w", F64, (2, 2))
    then_g.set_outputs([op1(then_g, "mul", [op1(then_g, "mul", [tx, tx]), tw])])
    else_g = S.Graph("else")
    ex, ew = else_g.input("x", F64, (2, 2)), else_g.input("w", F64, (2, 2))
    else_g.set_outputs([op1(else_g, "add", [op1(else_g, "mul", [op1(else_g, "sin", [ex]), ew]), ew])])
    g = S.Graph("f")
    x = g.input("x", F64, (2, 2))
    w = g.weight("w", F64, (2, 2))
    c = op1(g, "greater", [op1(g, "sum", [x]), const(g, 0, np.float64)])
    (y,) = g.if_else(c, then_g, else_g, [x, w], file="model.py", line=40)
    g.set_outputs([op1(g, "sum", [op1(g, "tanh", [y])])])
    dg = g.grad([x, w])
    assert "if(" in dg.text()
    wv = np.array([[0.5, -1.0], [1.5, 0.25]])
    for xv in (np.array([[0.3, -0.2], [0.7, 0.1]]), np.array([[-0.3, 0.2], [-0.7, 0.1]])):
        loss, gx, gw = run(dg, dev, [xv, wv], 3)
        np.testing.assert_allclose(gx, numeric_grad(g, dev, [xv, wv], 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gw, numeric_grad(g, dev, [xv, wv], 1), rtol=1e-6, atol=1e-8)
    # Second order by applying grad again: d2/dx2 of sum(if x > 0 then x^3 else sin x).
    t2 = S.Graph("then")
    a = t2.input("x", F64, (3,))
    t2.set_outputs([op1(t2, "mul", [op1(t2, "mul", [a, a]), a])])
    e2 = S.Graph("else")
    e2.set_outputs([op1(e2, "sin", [e2.input("x", F64, (3,))])])
    h = S.Graph("h")
    hx = h.input("x", F64, (3,))
    (hy,) = h.if_else(op1(h, "greater", [op1(h, "sum", [hx]), const(h, 0, np.float64)]), t2, e2, [hx])
    h.set_outputs([op1(h, "sum", [hy])])
    h2 = h.grad([hx]).grad([hx], output=1)
    for xv in (np.array([0.5, 1.0, -0.2]), np.array([-0.5, -1.0, 0.2])):
        _, d1, d2 = run(h2, dev, [xv], 3)
        if xv.sum() > 0:
            np.testing.assert_allclose(d1, 3 * xv * xv, rtol=1e-12)
            np.testing.assert_allclose(d2, 6 * xv, rtol=1e-12)
        else:
            np.testing.assert_allclose(d1, np.cos(xv), rtol=1e-12)
            np.testing.assert_allclose(d2, -np.sin(xv), rtol=1e-12)
    # Gradient graphs with control flow round-trip through JSON.
    assert S.Graph.from_json(dg.json()).json() == dg.json()


def test_gradient_of_while_matches_finite_differences(dev):
    # (x, w, i): while i < 3 and sum(x) < 5: x = x * w + sin(x); loss = sum(x^2)
    cond = S.Graph("cond")
    cx = cond.input("x", F64, (3,))
    cond.input("w", F64, (3,))
    ci = cond.input("i", I64, ())
    cond.set_outputs([op1(cond, "logical_and", [op1(cond, "less", [ci, const(cond, 3, np.int64)]),
                                              op1(cond, "less", [op1(cond, "sum", [cx]), const(cond, 5, np.float64)])])])
    body = S.Graph("body")
    bx, bw, bi = body.input("x", F64, (3,)), body.input("w", F64, (3,)), body.input("i", I64, ())
    body.set_outputs([op1(body, "add", [op1(body, "mul", [bx, bw]), op1(body, "sin", [bx])]), bw,
                      op1(body, "add", [bi, const(body, 1, np.int64)])])
    g = S.Graph("f")
    x = g.input("x", F64, (3,))
    w = g.input("w", F64, (3,))
    xf, _, _ = g.while_loop(cond, body, [x, w, const(g, 0, np.int64)], file="rnn.py", line=8)
    g.set_outputs([op1(g, "sum", [op1(g, "mul", [xf, xf])])])
    dg = g.grad([x, w])
    wv = np.array([0.9, -0.4, 1.1])
    for xv in (np.array([0.2, -0.3, 0.5]), np.array([2.0, 1.5, 1.0])):
        loss, gx, gw = run(dg, dev, [xv, wv], 3)
        np.testing.assert_allclose(gx, numeric_grad(g, dev, [xv, wv], 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gw, numeric_grad(g, dev, [xv, wv], 1), rtol=1e-6, atol=1e-8)


def test_second_order_through_a_while_loop(dev):
    # x -> sin(x) + x/2, three times; loss = sum(x^2). The Hessian-vector
    # product with ones (grad of sum(grad)) against differences of the grad.
    cond = S.Graph("cond")
    cond.input("x", F64, (2,))
    ci = cond.input("i", I64, ())
    cond.set_outputs([op1(cond, "less", [ci, const(cond, 3, np.int64)])])
    body = S.Graph("body")
    bx, bi = body.input("x", F64, (2,)), body.input("i", I64, ())
    body.set_outputs([op1(body, "add", [op1(body, "sin", [bx]), op1(body, "mul", [bx, const(body, 0.5, np.float64)])]),
                      op1(body, "add", [bi, const(body, 1, np.int64)])])
    g = S.Graph()
    x = g.input("x", F64, (2,))
    xf, _ = g.while_loop(cond, body, [x, const(g, 0, np.int64)])
    g.set_outputs([op1(g, "sum", [op1(g, "mul", [xf, xf])])])
    g1 = g.grad([x])
    g2 = g1.grad([x], output=1)
    xv = np.array([0.3, -0.7])
    _, _, hv = run(g2, dev, [xv], 3)
    exe = g1.compile(dev)

    def d1(v):
        return exe.run([S.Tensor.from_numpy(dev, v)], 2)[1].numpy().sum()

    h = 1e-6
    fd = [(d1(xv + h * e) - d1(xv - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)
