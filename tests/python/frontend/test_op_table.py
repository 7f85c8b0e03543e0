"""The elementwise op table (plugin-api/include/spora/ops_elementwise.def) is
the one list of elementwise ops: the binding's copy of it (compiled from the
.def), the registry, the Tensor methods and the test harness's reading of it
must agree, so any list that drifts fails here. (The plugins' op lists and
the ze plugin's OpenCL switches are compiled from the same table; a .cl
switch missing a row fails the build through -Wswitch -Werror.) Also checks
gather_elements, the op that shows what adding an op takes, end to end from
Python."""
import pathlib
import sys

import numpy as np
import pytest

import spora
from spora import _C

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "backend"))
import harness  # noqa: E402  (reads the .def like a list-keeping test would)

TABLE = _C._elementwise_table()
FLAG = {"fusible": 1, "method": 2, "smooth": 4, "attrs": 8}


def test_binding_and_harness_read_the_same_table():
    parsed = [(r["name"], r["kind"], r["arity"], sum(FLAG[f] for f in r["flags"]))
              for r in harness.elementwise_table()]
    assert [tuple(r) for r in TABLE] == parsed
    assert len({r[0] for r in TABLE}) == len(TABLE), "a row appears twice"


def test_every_row_is_a_registered_op_with_its_arity():
    ops = set(_C.op_names())
    for name, kind, arity, _ in TABLE:
        assert name in ops, f"{name} is in ops_elementwise.def but not registered"


def test_kinds_are_contiguous_and_in_order():
    order = ["UNARY", "NOT", "CAST", "BINARY", "COMPARE", "WHERE"]
    kinds = [r[1] for r in TABLE]
    assert kinds == sorted(kinds, key=order.index), "rows must stay grouped by kind, in the documented order"
    arity = {"UNARY": 1, "NOT": 1, "CAST": 1, "BINARY": 2, "COMPARE": 2, "WHERE": 3}
    for name, kind, n, _ in TABLE:
        assert n == arity[kind], name


def test_tensor_methods_are_the_method_rows():
    for name, _, _, flags in TABLE:
        if flags & FLAG["method"]:
            assert callable(getattr(spora.Tensor, name, None)), f"Tensor.{name} missing"
    x = spora.Tensor(np.array([0.25, 1.5], np.float32))
    np.testing.assert_allclose(x.exp().numpy(), np.exp([0.25, 1.5]).astype(np.float32), rtol=1e-6)


def test_fused_programs_accept_exactly_the_fusible_rows():
    fusible = {r[0] for r in TABLE if r[3] & FLAG["fusible"]}
    assert "cast" not in fusible and {"add", "where", "gelu"} <= fusible


def test_gather_elements_from_python():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[2, 0, -1, 1], [0, 0, 2, 2]], np.int64)
    want = np.take_along_axis(x, np.where(idx < 0, idx + 3, idx), axis=0)
    got = spora.ops.raw.gather_elements(spora.Tensor(x), spora.Tensor(idx), axis=0)
    np.testing.assert_array_equal(got.numpy(), want)
    got = spora.ops.raw.gather_elements(spora.Tensor(x), spora.Tensor(idx[:, :3].copy()), axis=-1)
    # indices smaller than x outside the axis read x's leading part
    want = np.take_along_axis(x[:2], np.where(idx[:, :3] < 0, idx[:, :3] + 4, idx[:, :3]), axis=1)
    np.testing.assert_array_equal(got.numpy(), want)


def test_gather_elements_gradient_scatters_back():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = spora.Tensor(np.array([[1, 1, 0]], np.int64))
    g = spora.grad(lambda t: spora.ops.raw.gather_elements(t, idx, axis=0).sum())(spora.Tensor(x))
    np.testing.assert_array_equal(g.numpy(), [[0, 0, 1], [1, 1, 0]])


def test_gather_elements_errors_name_the_op():
    x = spora.Tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(Exception, match=r"\[gather_elements\].*same rank"):
        spora.ops.raw.gather_elements(x, spora.Tensor(np.zeros((3,), np.int64)), axis=0)
    with pytest.raises(Exception, match=r"\[gather_elements\].*larger than x .* in dim 1"):
        spora.ops.raw.gather_elements(x, spora.Tensor(np.zeros((2, 5), np.int64)), axis=0)
    with pytest.raises(Exception, match=r"\[gather_elements\].*i32 or i64"):
        spora.ops.raw.gather_elements(x, spora.Tensor(np.zeros((3, 4), np.float32)), axis=0)
