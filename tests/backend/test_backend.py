"""Differential backend tests: every op case on every loaded device; cpu
against numpy, every other device against cpu. Fails when a registered op
has no case."""
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
        pytest.skip("defined by its own stream (random ops): checked statistically in tests/python and device-vs-cpu here")
    ref = REFS.get(case.get("ref", case["op"]))
    assert ref is not None, f"no numpy reference for {case['op']} (tests/backend/refs)"
    cpu = ctx.device_find("cpu")
    vals, outs = H.run(case, cpu)
    want = H.reference(case, ref, vals)
    assert len(outs) == len(want), f"{case['op']}: {len(outs)} outputs, reference has {len(want)}"
    for i, (g, w) in enumerate(zip(outs, want)):
        rtol, atol = H.tolerance(case, _dtype_name(g, case))
        H.assert_close(g, w, rtol, atol, f"{case['id']} output {i} vs numpy")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_device_matches_cpu(ctx, case):
    cpu = ctx.device_find("cpu")
    _, base = H.run(case, cpu)
    for dev in ctx.devices():
        if dev == cpu:
            continue
        _, outs = H.run(case, dev)
        for i, (g, w) in enumerate(zip(outs, base)):
            rtol, atol = H.tolerance(case, _dtype_name(g, case))
            H.assert_close(g, w, rtol, atol, f"{case['id']} output {i} on {dev.name} vs cpu")


def test_every_registered_op_has_a_case():
    covered = {c["op"] for c in CASES}
    missing = sorted(set(S.op_names()) - covered)
    assert not missing, f"ops without a backend case in sdk/conformance/cases: {missing}"


def test_every_case_names_a_registered_op():
    unknown = sorted({c["op"] for c in CASES} - set(S.op_names()))
    assert not unknown, f"cases for unregistered ops: {unknown}"
