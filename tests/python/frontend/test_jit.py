"""spora.jit: results equal eager, caching by signature, weights and
Parameter assignment, the eager fallback for untraceable control flow."""
import warnings

import numpy as np
import pytest

import spora
from spora import ops

RNG = np.random.default_rng(2)


def mlp(x, w1, b1, w2):
    h = (x @ w1 + b1).relu()
    return (h @ w2).softmax(axis=-1)


def test_jit_equals_eager():
    args = [RNG.standard_normal(s).astype(np.float32) for s in [(8, 5), (5, 16), (16,), (16, 3)]]
    ts = [spora.Tensor(a) for a in args]
    eager = mlp(*ts).asnumpy()
    f = spora.jit(mlp)
    np.testing.assert_allclose(f(*ts).asnumpy(), eager, rtol=1e-5, atol=1e-6)
    f2 = spora.jit(mlp, level=2)  # fusion; numerics stay f32 (bf16 only through spora.amp)
    np.testing.assert_allclose(f2(*ts).asnumpy(), eager, rtol=1e-5, atol=1e-6)
    f0 = spora.jit(level=0)(mlp)
    np.testing.assert_allclose(f0(*ts).asnumpy(), eager, rtol=1e-5, atol=1e-6)


def test_cache_hits_and_recompiles():
    calls = []

    @spora.jit
    def f(x, scale):
        calls.append(1)
        return x * scale + 1

    a = spora.Tensor(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(f(a, 2.0).asnumpy(), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(f(a * 2, 2.0).asnumpy(), np.full((2, 3), 5.0))
    assert f.stats == {"traces": 1, "hits": 1, "eager_calls": 0}
    assert len(calls) == 1  # the Python body ran once, while tracing
    f(spora.Tensor(np.ones((4, 3), np.float32)), 2.0)  # new shape: recompile
    assert f.stats["traces"] == 2
    f(a, 3.0)  # a non-tensor argument is part of the key, by value
    assert f.stats["traces"] == 3
    f(a.astype(spora.float64), 3.0)  # new dtype
    assert f.stats["traces"] == 4
    f(a, 3.0)
    assert f.stats["hits"] == 2


def test_structured_arguments_and_outputs():
    @spora.jit
    def f(d, xs):
        return {"sum": d["a"] + xs[0], "pair": (xs[1] * 2, 7)}

    a, b, c = (spora.Tensor(np.full((2,), v, np.float32)) for v in (1.0, 2.0, 3.0))
    out = f({"a": a}, [b, c])
    np.testing.assert_array_equal(out["sum"].asnumpy(), [3.0, 3.0])
    np.testing.assert_array_equal(out["pair"][0].asnumpy(), [6.0, 6.0])
    assert out["pair"][1] == 7


def test_parameters_are_weights_bound_at_every_call():
    w = spora.Parameter(np.ones((3,), np.float32), name="w")

    @spora.jit
    def f(x):
        return x * w

    x = spora.Tensor(np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(f(x).asnumpy(), [0, 1, 2])
    w.set_data(spora.Tensor(np.full((3,), 2.0, np.float32)))
    np.testing.assert_array_equal(f(x).asnumpy(), [0, 2, 4])  # the new value, no retrace
    assert f.stats["traces"] == 1
    assert "weight" in f.last_graph.text()


def test_assignment_inside_jit_is_written_back():
    w = spora.Parameter(np.zeros((2,), np.float32), name="acc")

    @spora.jit
    def step(x):
        w.assign_value(w + x)
        return w * 10  # reads the assigned value

    x = spora.Tensor(np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(step(x).asnumpy(), [10, 20])
    np.testing.assert_array_equal(w.asnumpy(), [1, 2])
    np.testing.assert_array_equal(step(x).asnumpy(), [20, 40])
    np.testing.assert_array_equal(w.asnumpy(), [2, 4])
    assert step.stats["traces"] == 1


def test_whole_training_step_as_one_graph():
    """Forward, grad and an SGD update in one compiled graph equal the same
    step run eagerly."""
    x = RNG.standard_normal((16, 4)).astype(np.float32)
    y = RNG.integers(0, 3, 16).astype(np.int64)
    w0 = RNG.standard_normal((3, 4)).astype(np.float32) * 0.1
    b0 = np.zeros(3, np.float32)

    def make():
        w = spora.Parameter(w0.copy(), name="w")
        b = spora.Parameter(b0.copy(), name="b")

        def loss_fn(xb, yb):
            return ops.cross_entropy(ops.linear(xb, w, b), yb)

        vg = spora.value_and_grad(loss_fn, grad_position=None, weights=[w, b])

        def step(xb, yb):
            loss, (gw, gb) = vg(xb, yb)
            w.assign_value(w - 0.5 * gw)
            b.assign_value(b - 0.5 * gb)
            return loss
        return step, w, b

    eager_step, we, be = make()
    jit_step, wj, bj = make()
    jit_step = spora.jit(jit_step)
    xt, yt = spora.Tensor(x), spora.Tensor(y)
    losses_e = [eager_step(xt, yt).item() for _ in range(5)]
    losses_j = [jit_step(xt, yt).item() for _ in range(5)]
    np.testing.assert_allclose(losses_j, losses_e, rtol=1e-5)
    assert losses_j[-1] < losses_j[0]
    np.testing.assert_allclose(wj.asnumpy(), we.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bj.asnumpy(), be.asnumpy(), rtol=1e-5, atol=1e-6)
    assert jit_step.stats == {"traces": 1, "hits": 4, "eager_calls": 0}


def test_untraceable_control_flow_falls_back_with_one_warning():
    @spora.jit
    def f(x):
        if x.sum() > 0:  # the line the warning names
            return x * 2
        return x * -1

    line = f.__wrapped__.__code__.co_firstlineno + 2
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        r1 = f(spora.Tensor(np.array([1.0, 2.0], np.float32)))
        r2 = f(spora.Tensor(np.array([-1.0, -2.0], np.float32)))
        r3 = f(spora.Tensor(np.array([3.0], np.float32)))
    np.testing.assert_array_equal(r1.asnumpy(), [2, 4])
    np.testing.assert_array_equal(r2.asnumpy(), [1, 2])
    np.testing.assert_array_equal(r3.asnumpy(), [6])
    jw = [w for w in rec if issubclass(w.category, spora.JitFallbackWarning)]
    assert len(jw) == 1
    assert jw[0].filename == __file__ and jw[0].lineno == line
    assert f"test_jit.py:{line}" in str(jw[0].message)
    assert f.stats["eager_calls"] == 3


@pytest.mark.parametrize("read", [lambda x: x.item(), lambda x: x.asnumpy(), lambda x: float(x.sum()),
                                  lambda x: int(x[0])])
def test_every_value_read_falls_back(read):
    def f(x):
        read(x)
        return x + 1

    g = spora.jit(f)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = g(spora.Tensor(np.array([1.0], np.float32)))
    assert out.item() == 2.0
    assert sum(issubclass(w.category, spora.JitFallbackWarning) for w in rec) == 1


def test_swallowed_untraceable_error_still_falls_back():
    @spora.jit
    def f(x):
        try:
            bool(x.sum() > 0)
        except Exception:
            pass
        return x * 3

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert f(spora.Tensor(np.array([1.0], np.float32))).item() == 3.0
    assert f.stats["eager_calls"] == 1


def test_jit_on_methods_keeps_instances_apart():
    class Net:
        def __init__(self, v):
            self.w = spora.Parameter(np.full((2,), v, np.float32), name="w")

        @spora.jit
        def __call__(self, x):
            return x * self.w

    a, b = Net(2.0), Net(3.0)
    x = spora.Tensor(np.ones((2,), np.float32))
    np.testing.assert_array_equal(a(x).asnumpy(), [2, 2])
    np.testing.assert_array_equal(b(x).asnumpy(), [3, 3])


def test_compile_cell_helper():
    class Cell:
        def __init__(self):
            self.w = spora.Parameter(np.full((2,), 4.0, np.float32), name="w")

        def construct(self, x):
            return x + self.w

    c = Cell()
    f = spora._jit.compile_cell(c)
    assert f is spora._jit.compile_cell(c)
    np.testing.assert_array_equal(f(spora.Tensor(np.ones(2, np.float32))).asnumpy(), [5, 5])
    assert f.stats["traces"] == 1


def test_jit_on_sim_device():
    f = spora.jit(lambda x: (x * 2).exp().sum())
    a = np.array([0.1, 0.2], np.float32)
    r = f(spora.Tensor(a, device="sim:0"))
    assert r.device == "sim:0"
    assert r.item() == pytest.approx(np.exp(a * 2).sum(), rel=1e-6)


def test_nested_jit_is_inlined():
    inner = spora.jit(lambda x: x * 2)
    outer = spora.jit(lambda x: inner(x) + 1)
    assert outer(spora.Tensor([1.0])).item() == 3.0
    assert inner.stats["traces"] == 0


def test_parameter_arguments_are_weights_and_kwargs_work():
    w = spora.Parameter(np.full((2,), 2.0, np.float32), name="w")

    @spora.jit
    def f(x, p, *, bias=0.0):
        return x * p + bias

    x = spora.Tensor(np.ones((2,), np.float32))
    np.testing.assert_array_equal(f(x, w, bias=1.0).asnumpy(), [3, 3])
    w.assign_value(5.0)
    np.testing.assert_array_equal(f(x, w, bias=1.0).asnumpy(), [6, 6])  # current value, same graph
    assert f.stats["traces"] == 1
    f(x, w, bias=2.0)  # a new non-tensor value: new graph
    assert f.stats["traces"] == 2
    w.set_data(spora.Tensor(np.ones((3,), np.float32)))  # a weight changed shape: retrace
    np.testing.assert_array_equal(f(spora.Tensor(np.ones((3,), np.float32)), w, bias=2.0).asnumpy(), [3, 3, 3])


def test_graph_mode_grad_is_compiled_and_cached():
    spora.set_context(mode=spora.GRAPH_MODE)
    g = spora.value_and_grad(lambda x: (x * x).sum())
    for v in ([1.0, 2.0], [3.0, 4.0]):
        val, grad = g(spora.Tensor(np.array(v, np.float32)))
        assert val.item() == pytest.approx(sum(a * a for a in v))
        np.testing.assert_allclose(grad.asnumpy(), 2 * np.array(v))
    assert g._jit.stats["traces"] == 1 and g._jit.stats["hits"] == 1


def test_fast_path_outputs_and_hits():
    x = spora.Tensor(np.ones((2,), np.float32))
    seven = spora.jit(lambda a: 7)  # a non-tensor result
    assert seven(x) == 7 and seven(x) == 7
    one = spora.jit(lambda a: a * 2)
    for _ in range(3):
        np.testing.assert_array_equal(one(x).asnumpy(), [2, 2])
    assert one.stats == {"traces": 1, "hits": 2, "eager_calls": 0}
    one(x.astype(spora.float64))  # another signature on the fast path
    assert one.stats["traces"] == 2
