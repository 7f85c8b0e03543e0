"""The numpy side of the op cases of sdk/conformance/cases: runs a case on a
device (cpu) and compares it with a float64 numpy reference
(tests/backend/refs). Device-vs-cpu comparisons are the conformance kit's
(sdk/conformance, `spora plugin check`), which reads the same case files with
the same input kinds and tolerances (sdk/conformance/src/cases.cpp).

A case (JSON):
  {"op": "add", "dtypes": ["f32", "f64"], "inputs": [{"shape": [2, 3]}, ...],
   "attrs": {...}, "outputs": 1, "tol": {"f32": [rtol, atol]}, "ref": "add",
   "device": true, "numpy": true}
"numpy": false skips the numpy comparison (ops defined by their own random
stream; the kit still compares them device vs cpu). "device": true passes the
device to ops without inputs (creation ops).
Input fields: "shape"; "init" = normal (default) | positive | uniform:LO:HI |
int:LO:HI | bool | arange; "dtype" = a fixed dtype for inputs that do not
follow the case's dtype (indices, masks).
Multi-step cases (optimizer updates) run the op "steps" times: "feed" lists
[output, input] pairs, output `output` of one step becoming input `input` of
the next, and "count" lists scalar inputs that go up by 1 each step. The
numpy reference is looped the same way (reference()).
"""
import json
import os
import pathlib
import re

import numpy as np

import spora_capi as S

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASE_DIR = ROOT / "sdk" / "conformance" / "cases"
EW_TABLE = ROOT / "plugin-api" / "include" / "spora" / "ops_elementwise.def"
_EW_ROW = re.compile(r'^SPORA_EW_OP\(\s*(\w+),\s*"(\w+)",\s*(\w+),\s*(\d+),\s*(\d+),\s*([^)]*)\)', re.M)
_EW_FLAGS = {"F_": "fusible", "M_": "method", "S_": "smooth", "A_": "attrs"}


def elementwise_table():
    """The rows of the elementwise op table (ops_elementwise.def), in order:
    dicts with name, kind, arity and flags (a set of "fusible", "method",
    "smooth", "attrs")."""
    rows = []
    for m in _EW_ROW.finditer(EW_TABLE.read_text()):
        flags = {_EW_FLAGS[t.strip()] for t in m.group(6).split("|") if t.strip() != "0"}
        rows.append({"id": m.group(1), "name": m.group(2), "kind": m.group(3), "arity": int(m.group(4)),
                     "flags": flags})
    return rows

DTYPES = {
    "f32": S.DTYPE_F32, "f64": S.DTYPE_F64, "f16": S.DTYPE_F16, "bf16": S.DTYPE_BF16,
    "i32": S.DTYPE_I32, "i64": S.DTYPE_I64, "u8": S.DTYPE_U8, "bool": S.DTYPE_BOOL,
}
FLOATS = {"f32", "f64", "f16", "bf16"}

# (rtol, atol) against a float64 numpy reference computed on the same
# (rounded) inputs.
DEFAULT_TOL = {
    "f64": (1e-10, 1e-12),
    "f32": (2e-5, 2e-6),
    "f16": (2e-2, 2e-3),
    "bf16": (3e-2, 2e-2),
    "i32": (0, 0), "i64": (0, 0), "u8": (0, 0), "bool": (0, 0),
}


def load_cases():
    """Every case of every family, expanded per dtype: list of dicts with an
    "id" and a single "dtype"."""
    out = []
    for path in sorted(CASE_DIR.glob("*.json")):
        family = json.loads(path.read_text())
        for i, case in enumerate(family["cases"]):
            for dt in case.get("dtypes", ["f32"]):
                c = dict(case)
                c["dtype"] = dt
                c["id"] = f"{path.stem}:{i}:{case['op']}:{dt}"
                out.append(c)
    return out


# -- bf16 lives in numpy as its bit pattern (uint16) --------------------------
def f32_to_bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), r)


def bf16_bits_to_f64(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def make_input(spec, dtype, rng):
    """Returns (value as float64/int/bool numpy array, storage array to hand to
    Spora). The value is what the storage holds exactly (rounded for f16/bf16)."""
    dt = spec.get("dtype", dtype)
    shape = tuple(spec["shape"])
    init = spec.get("init", "normal" if dt in FLOATS else "int:0:10")
    kind, *args = init.split(":")
    if kind == "normal":
        v = rng.standard_normal(shape)
    elif kind == "positive":
        v = rng.uniform(0.1, 3.0, shape)
    elif kind == "uniform":
        v = rng.uniform(float(args[0]), float(args[1]), shape)
    elif kind == "int":
        v = rng.integers(int(args[0]), int(args[1]), shape)
    elif kind == "bool":
        v = rng.integers(0, 2, shape).astype(bool)
    elif kind == "arange":
        v = np.arange(int(np.prod(shape))).reshape(shape)
    else:
        raise ValueError(f"unknown init {init}")
    if dt == "f64":
        store = np.asarray(v, np.float64)
        return store.copy(), store, dt
    if dt == "f32":
        store = np.asarray(v, np.float32)
        return store.astype(np.float64), store, dt
    if dt == "f16":
        store = np.asarray(v, np.float16)
        return store.astype(np.float64), store, dt
    if dt == "bf16":
        store = f32_to_bf16_bits(v)
        return bf16_bits_to_f64(store), store, dt
    npdt = {"i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}[dt]
    store = np.asarray(v).astype(npdt)
    return store.copy(), store, dt


def to_spora(device, store, dt):
    store = np.ascontiguousarray(store) if store.ndim else store.copy()
    return S.Tensor.create_raw(device, DTYPES[dt], store.shape, store, store.nbytes)


def from_spora(t):
    """Reads a tensor back as a float64 (floats) or native (ints/bool) array."""
    dt = t.dtype
    if dt == S.DTYPE_BF16:
        bits = np.empty(t.shape, np.uint16)
        S.call("spora_tensor_read", t.handle, bits.ctypes.data_as(S._vp), bits.nbytes)
        return bf16_bits_to_f64(bits)
    v = t.numpy()
    return v.astype(np.float64) if v.dtype.kind == "f" else v


def run(case, device, rng_seed=0):
    """Runs `case` on `device`: returns (inputs as values, outputs as arrays)."""
    rng = np.random.default_rng(rng_seed)
    vals, tensors, stores = [], [], []
    for spec in case["inputs"]:
        v, store, dt = make_input(spec, case["dtype"], rng)
        vals.append(v)
        stores.append((store, dt))
        tensors.append(to_spora(device, store, dt))
    call = lambda: S.op_call(case["op"], tensors, case.get("attrs") or None, num_outputs=case.get("outputs", 1),
                             device=device)
    outs = call()
    for step in range(1, case.get("steps", 1)):
        for o, i in case.get("feed", []):
            tensors[i] = outs[o]
        for i in case.get("count", []):
            store, dt = stores[i]
            tensors[i] = to_spora(device, np.asarray(store + step, store.dtype), dt)
        outs = call()
    return vals, [from_spora(o) for o in outs]


def reference(case, ref, vals):
    """The numpy reference of `case` on the input values `vals`, looped like
    run() for multi-step cases."""
    vals = list(vals)
    attrs = case.get("attrs", {})
    want = ref(vals, attrs)
    for _ in range(case.get("steps", 1) - 1):
        for o, i in case.get("feed", []):
            vals[i] = want[o]
        for i in case.get("count", []):
            vals[i] = vals[i] + 1
        want = ref(vals, attrs)
    return want


def tolerance(case, out_dtype_name):
    t = case.get("tol", {}).get(out_dtype_name)
    return tuple(t) if t else DEFAULT_TOL[out_dtype_name]


def assert_close(got, want, rtol, atol, what):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if got.dtype == np.bool_ or want.dtype == np.bool_ or (rtol == 0 and atol == 0):
        np.testing.assert_array_equal(got, want.astype(got.dtype) if want.dtype != got.dtype else want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
