"""Optimizer update of an MLP's parameters (784-512-512-10: 6 tensors,
669,706 f32 values) on cpu, one step at a time, outputs fed back as the next
step's inputs:

  fused         one sgd_update / adam_update per step (docs/ops-optim.md):
                as a compiled graph, eager with fresh outputs (spora_op_call)
                and eager in place (spora_op_call_into)
  composed      the same formulas as elementwise ops per tensor (4 per
                tensor for SGD momentum, 13 for Adam), eager and compiled at
                O1 (one kernel per op) and O2 (elementwise_fusion)
  numpy         an in-place numpy loop per tensor (one thread)
  torch         torch.optim with foreach=True and fused=True, when torch is
                installed (as many threads as Spora: SPORA_NUM_THREADS, else 2)

Prints microseconds per step (best of 7 runs) and each variant's time relative to
the fused graph.

Usage: python bench/optim_update.py [steps]   (SPORA_LIB defaults to
build/lib/libspora.so; the eager spora figures include ctypes' few
microseconds per call).
"""
import os
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("SPORA_LIB", str(ROOT / "build" / "lib" / "libspora.so"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
import spora_capi as S  # noqa: E402

SHAPES = [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)]
LR, MU = 0.01, 0.9
B1, B2, EPS = 0.9, 0.999, 1e-8
F32 = S.DTYPE_F32
# Threads for Spora's cpu plugin and for torch (SPORA_NUM_THREADS, else 2).
THREADS = int(os.environ.get("SPORA_NUM_THREADS", "2"))


def best_us(fn, steps, reps=7):
    """Microseconds per step: the best of `reps` runs of `steps` steps. Not
    the median: on this shared 2-core VM a descheduled OpenMP thread costs a
    step milliseconds, and how often that happens says nothing about the
    code."""
    fn()  # warm up: plans, buffer caches
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        times.append((time.perf_counter() - t0) / steps * 1e6)
    return min(times)


class Problem:
    def __init__(self, rng):
        self.p = [(0.05 * rng.standard_normal(s)).astype(np.float32) for s in SHAPES]
        self.g = [(0.01 * rng.standard_normal(s)).astype(np.float32) for s in SHAPES]
        self.zeros = [np.zeros(s, np.float32) for s in SHAPES]


def T(dev, a):
    a = np.asarray(a)
    return S.Tensor.from_numpy(dev, np.ascontiguousarray(a) if a.ndim else a.copy())


# -- spora: fused -------------------------------------------------------------

def fused_eager(dev, prob, kind):
    n = len(SHAPES)
    grads = [T(dev, g) for g in prob.g]
    state = {"p": [T(dev, p) for p in prob.p], "s": [T(dev, z) for z in prob.zeros] * (1 if kind == "sgd" else 2)}
    lr, one = T(dev, np.float32(LR)), T(dev, np.float32(1))
    step = [0]

    def run():
        if kind == "sgd":
            outs = S.op_call("sgd_update", [lr, one] + state["p"] + grads + state["s"], {"momentum": MU},
                             num_outputs=2 * n)
        else:
            step[0] += 1
            outs = S.op_call("adam_update", [lr, T(dev, np.int64(step[0])), one] + state["p"] + grads + state["s"],
                             None, num_outputs=3 * n)
        state["p"], state["s"] = outs[:n], outs[n:]
    return run


def fused_in_place(dev, prob, kind):
    """The fused op written into the params' and states' own tensors
    (spora_op_call_into): no allocation per step."""
    grads = [T(dev, g) for g in prob.g]
    params = [T(dev, p) for p in prob.p]
    states = [T(dev, z) for z in prob.zeros] + ([T(dev, z) for z in prob.zeros] if kind == "adam" else [])
    lr, one = T(dev, np.float32(LR)), T(dev, np.float32(1))
    step = [0]

    def run():
        if kind == "sgd":
            S.op_call_into("sgd_update", [lr, one] + params + grads + states, params + states, {"momentum": MU})
        else:
            step[0] += 1
            S.op_call_into("adam_update", [lr, T(dev, np.int64(step[0])), one] + params + grads + states,
                           params + states)
    return run


def _graph_runner(dev, g, n_states, prob, scalars):
    """Runs a compiled graph whose params are [params, grads, states,
    scalars...] and whose outputs are [new params, new states]."""
    exe = g.compile(dev)
    n = len(SHAPES)
    grads = [T(dev, x) for x in prob.g]
    state = {"p": [T(dev, p) for p in prob.p], "s": [T(dev, z) for z in prob.zeros] * n_states}
    step = [0]

    def run():
        step[0] += 1
        outs = exe.run(state["p"] + grads + state["s"] + [T(dev, v) for v in scalars(step[0])], n + n_states * n)
        state["p"], state["s"] = outs[:n], outs[n:]
    return run


def _leaves(g, n_states):
    p = [g.input(f"p{i}", F32, list(s)) for i, s in enumerate(SHAPES)]
    gr = [g.input(f"g{i}", F32, list(s)) for i, s in enumerate(SHAPES)]
    st = [g.input(f"s{j}_{i}", F32, list(s)) for j in range(n_states) for i, s in enumerate(SHAPES)]
    return p, gr, st


def fused_graph(dev, prob, kind):
    g = S.Graph("fused")
    n_states = 1 if kind == "sgd" else 2
    p, gr, st = _leaves(g, n_states)
    lr = g.input("lr", F32, [])
    one = g.constant(T(dev, np.float32(1)))
    if kind == "sgd":
        outs = g.op("sgd_update", [lr, one] + p + gr + st, {"momentum": MU})
        scalars = lambda s: [np.float32(LR)]
    else:
        step = g.input("step", S.DTYPE_I64, [])
        outs = g.op("adam_update", [lr, step, one] + p + gr + st)
        scalars = lambda s: [np.float32(LR), np.int64(s)]
    g.set_outputs(outs)
    return _graph_runner(dev, g, n_states, prob, scalars)


# -- spora: composed ----------------------------------------------------------

def _composed_ops(op, kind, p, g, st, k):
    """The update of tensor k from elementwise ops; `op(name, inputs)` adds
    or runs one op, k(v) makes a scalar. Returns (new p, new states)."""
    if kind == "sgd":
        b = op("add", [op("mul", [st[0], k("mu")]), g])
        return op("sub", [p, op("mul", [b, k("lr")])]), [b]
    m = op("add", [op("mul", [st[0], k("b1")]), op("mul", [g, k("a1")])])
    v = op("add", [op("mul", [st[1], k("b2")]), op("mul", [op("mul", [g, g]), k("a2")])])
    denom = op("add", [op("div", [op("sqrt", [v]), k("bc2")]), k("eps")])
    return op("sub", [p, op("mul", [op("div", [m, denom]), k("step_size")])]), [m, v]


def _adam_scalars(s):
    return {"lr": LR, "b1": B1, "a1": 1 - B1, "b2": B2, "a2": 1 - B2, "eps": EPS,
            "bc2": np.sqrt(1 - B2 ** s), "step_size": LR / (1 - B1 ** s), "mu": MU}


def composed_eager(dev, prob, kind):
    n = len(SHAPES)
    grads = [T(dev, g) for g in prob.g]
    n_states = 1 if kind == "sgd" else 2
    state = {"p": [T(dev, p) for p in prob.p], "s": [T(dev, z) for z in prob.zeros] * n_states}
    step = [0]
    op = lambda name, ins: S.op_call(name, ins)[0]

    def run():
        step[0] += 1
        sc = {name: T(dev, np.float32(v)) for name, v in _adam_scalars(step[0]).items()}
        new_p, new_s = [], [[] for _ in range(n_states)]
        for i in range(n):
            q, ss = _composed_ops(op, kind, state["p"][i], grads[i], [state["s"][j * n + i] for j in range(n_states)],
                                  lambda name: sc[name])
            new_p.append(q)
            for j, s_ in enumerate(ss):
                new_s[j].append(s_)
        state["p"], state["s"] = new_p, [t for lst in new_s for t in lst]
    return run


def composed_graph(dev, prob, kind, level):
    g = S.Graph("composed")
    n_states = 1 if kind == "sgd" else 2
    p, gr, st = _leaves(g, n_states)
    names = ["mu", "lr"] if kind == "sgd" else ["b1", "a1", "b2", "a2", "eps", "bc2", "step_size"]
    sc = {name: g.input(name, F32, []) for name in names}
    n = len(SHAPES)
    new_p, new_s = [], [[] for _ in range(n_states)]
    for i in range(n):
        q, ss = _composed_ops(lambda name, ins: g.op(name, ins)[0], kind, p[i], gr[i],
                              [st[j * n + i] for j in range(n_states)], lambda name: sc[name])
        new_p.append(q)
        for j, s_ in enumerate(ss):
            new_s[j].append(s_)
    g.set_outputs(new_p + [t for lst in new_s for t in lst])
    if level:
        g.optimize(level)
    scalars = lambda s: [np.float32(_adam_scalars(s)[name]) for name in names]
    return _graph_runner(dev, g, n_states, prob, scalars)


# -- numpy and torch ----------------------------------------------------------

def numpy_loop(prob, kind):
    p = [x.copy() for x in prob.p]
    s = [z.copy() for z in prob.zeros] + [z.copy() for z in prob.zeros]
    tmp = [z.copy() for z in prob.zeros]
    step = [0]

    def run():
        step[0] += 1
        for i, g in enumerate(prob.g):
            if kind == "sgd":
                b = s[i]
                b *= MU
                b += g
                np.multiply(b, LR, out=tmp[i])
                p[i] -= tmp[i]
            else:
                m, v, t = s[i], s[6 + i], tmp[i]
                m *= B1
                m += (1 - B1) * g
                v *= B2
                np.multiply(g, g, out=t)
                t *= 1 - B2
                v += t
                np.sqrt(v, out=t)
                t /= np.sqrt(1 - B2 ** step[0])
                t += EPS
                np.divide(m, t, out=t)
                t *= LR / (1 - B1 ** step[0])
                p[i] -= t
    return run


def torch_step(prob, kind, mode):
    import torch
    torch.set_num_threads(THREADS)
    ps = [torch.tensor(x, requires_grad=True) for x in prob.p]
    for t, g in zip(ps, prob.g):
        t.grad = torch.tensor(g)
    opts = {mode: True}
    opt = torch.optim.SGD(ps, lr=LR, momentum=MU, **opts) if kind == "sgd" else torch.optim.Adam(ps, lr=LR, **opts)
    return opt.step


def torch_rows(kind, steps):
    """torch's figures from a child process: torch brings its own OpenMP
    runtime, whose threads would compete with Spora's in this one."""
    import subprocess
    code = ("import sys; sys.path.insert(0, %r); import optim_update as B, numpy as np; "
            "prob = B.Problem(np.random.default_rng(0)); "
            "print(*[B.best_us(B.torch_step(prob, %r, m), %d) for m in ('foreach', 'fused')])"
            % (str(pathlib.Path(__file__).parent), kind, steps))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        return []
    foreach, fused = (float(x) for x in out.stdout.split())
    return [(f"torch foreach ({THREADS} thr)", foreach), (f"torch fused ({THREADS} thr)", fused)]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    ctx = S.Context()
    cpu = ctx.device_find("cpu")
    prob = Problem(np.random.default_rng(0))
    try:
        import importlib.util
        have_torch = importlib.util.find_spec("torch") is not None
    except ImportError:
        have_torch = False
    total = sum(int(np.prod(s)) for s in SHAPES)
    print(f"optimizer update, MLP 784-512-512-10 ({total} f32 params in {len(SHAPES)} tensors), cpu, {THREADS} "
          f"thread(s), "
          f"best of 7 runs of {steps} steps, us/step; ratio = time / fused graph")
    for kind, title in (("sgd", "SGD momentum"), ("adam", "Adam")):
        # Factories: each variant's tensors exist only while it is measured.
        rows = [("fused graph", lambda: fused_graph(cpu, prob, kind)),
                ("fused eager", lambda: fused_eager(cpu, prob, kind)),
                ("fused eager in place", lambda: fused_in_place(cpu, prob, kind)),
                ("composed graph O1", lambda: composed_graph(cpu, prob, kind, 1)),
                ("composed graph O2", lambda: composed_graph(cpu, prob, kind, 2)),
                ("composed eager", lambda: composed_eager(cpu, prob, kind)),
                ("numpy loop (1 thread)", lambda: numpy_loop(prob, kind))]
        results = [(name, best_us(make(), steps)) for name, make in rows]
        if have_torch:
            results += torch_rows(kind, steps)
        print(f"\n{title}")
        base = results[0][1]
        for name, us in results:
            print(f"  {name:<26} {us:9.1f} us   ratio {us / base:5.2f}")


if __name__ == "__main__":
    main()
