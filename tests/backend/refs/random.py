"""References for the creation ops (zeros, ones, full, arange, eye) and the
deterministic cases of dropout (training off, p = 0, p = 1). uniform,
normal, truncated_normal and dropout with 0 < p < 1 are defined by their
Philox stream: their cases carry "numpy": false and are checked
statistically in tests/python/test_random.py."""
import numpy as np

from . import ref


def _value(dtype, v):
    # bool holds value != 0 (numpy's rule); every other dtype compares in
    # float64 or as integers, which the harness casts to.
    return np.asarray(v != 0) if dtype == "bool" else np.asarray(v, np.float64)


@ref("zeros")
def _zeros(x, a):
    return [np.zeros(a["shape"]) if a.get("dtype") != "bool" else np.zeros(a["shape"], bool)]


@ref("ones")
def _ones(x, a):
    return [np.ones(a["shape"]) if a.get("dtype") != "bool" else np.ones(a["shape"], bool)]


@ref("full")
def _full(x, a):
    return [np.full(a["shape"], _value(a.get("dtype", "f32"), a["value"]))]


@ref("arange")
def _arange(x, a):
    return [np.arange(float(a.get("start", 0)), float(a["stop"]), float(a.get("step", 1)), dtype=np.float64)]


@ref("eye")
def _eye(x, a):
    n = a["n"]
    m = a.get("m", -1)
    e = np.eye(n, n if m == -1 else m)
    return [e.astype(bool) if a.get("dtype") == "bool" else e]


@ref("dropout")
def _dropout(x, a):
    p = float(a["p"])
    if not a.get("training", True) or p == 0:
        return [x[0], np.ones(x[0].shape, bool)]
    if p == 1:
        return [np.zeros_like(x[0]), np.zeros(x[0].shape, bool)]
    raise AssertionError("dropout with 0 < p < 1 is defined by its random stream: give the case \"numpy\": false")
