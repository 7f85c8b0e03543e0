"""Backend tests of the op cases: cpu against numpy references. Fails when a
registered op has no case.

Every other device is compared with cpu by the conformance kit, not here:
`spora plugin check` runs the same cases on each device plugin `spora
devices` lists (ctest backend_devices_conformance,
tests/conformance/check_every_device.sh)."""
import re

import numpy as np
import pytest

import harness as H
import spora_capi as S
from refs import REFS

CASES = H.load_cases()


@pytest.fixture(scope="module")
def ctx():
    c = S.Context()
    yield c
    c.free()


def _dtype_name(arr, case):
    if arr.dtype == np.bool_:
        return "bool"
    if arr.dtype.kind in "iu":
        return {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8"}[arr.dtype]
    return case.get("out_dtype", case["dtype"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_cpu_matches_numpy(ctx, case):
    if case.get("numpy") is False:
        pytest.skip("defined by its own stream (random ops): checked statistically in tests/python and device vs cpu by the conformance kit")
    ref = REFS.get(case.get("ref", case["op"]))
    assert ref is not None, f"no numpy reference for {case['op']} (tests/backend/refs)"
    cpu = ctx.device_find("cpu")
    vals, outs = H.run(case, cpu)
    want = H.reference(case, ref, vals)
    assert len(outs) == len(want), f"{case['op']}: {len(outs)} outputs, reference has {len(want)}"
    for i, (g, w) in enumerate(zip(outs, want)):
        rtol, atol = H.tolerance(case, _dtype_name(g, case))
        H.assert_close(g, w, rtol, atol, f"{case['id']} output {i} vs numpy")


def test_every_registered_op_has_a_case():
    covered = {c["op"] for c in CASES}
    missing = sorted(set(S.op_names()) - covered)
    assert not missing, f"ops without a backend case in sdk/conformance/cases: {missing}"


def test_every_case_names_a_registered_op():
    unknown = sorted({c["op"] for c in CASES} - set(S.op_names()))
    assert not unknown, f"cases for unregistered ops: {unknown}"


def test_default_tolerances_match_the_kit():
    """The kit (sdk/conformance/src/cases.cpp) judges devices against cpu with
    the same per-dtype defaults this harness judges cpu against numpy with;
    the two tables are in two languages, so check they have not drifted."""
    src = (H.ROOT / "sdk" / "conformance" / "src" / "cases.cpp").read_text()
    kit = {name: (float(r), float(a))
           for name, r, a in re.findall(r'\{"(\w+)", \{([-+0-9.e]+), ([-+0-9.e]+)\}\}', src)}
    assert kit, "no default tolerance table found in sdk/conformance/src/cases.cpp"
    # Dtypes the kit does not list compare exactly, as (0, 0) does here.
    ours = {name: tuple(map(float, tol)) for name, tol in H.DEFAULT_TOL.items() if tuple(tol) != (0, 0)}
    assert kit == ours, f"kit defaults {kit} vs tests/backend/harness.py {ours}"
