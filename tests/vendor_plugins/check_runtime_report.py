"""Runs the conformance kit on the ze plugin over the fake Level Zero driver
(ZE_ENABLE_ALT_DRIVERS, set by ctest) and requires every ABI and runtime
check to pass (or skip with a reason, or be an optional feature the plugin
leaves out: the graph path).

Kernel cases are deliberately not judged: the fake driver does not execute
kernels (its "device memory" starts as NaN, so their outputs would fail).
The ze kernels' math is checked on PoCL instead (ze_kernels_pocl).

usage: check_runtime_report.py <path to spora> <report.json>
"""
import json
import subprocess
import sys

spora, report = sys.argv[1], sys.argv[2]
run = subprocess.run([spora, "plugin", "check", "ze", "--ops", "relu", "--quick", "--timeout", "60",
                      "--report", report], capture_output=True, text=True)
print(run.stdout)
print(run.stderr, file=sys.stderr)
with open(report) as f:
    r = json.load(f)
checks = [c for c in r["checks"] if c["part"] in ("abi", "runtime")]
bad = [c for c in checks if c["status"] not in ("pass", "skip", "not implemented")]
runtime_pass = sum(1 for c in checks if c["part"] == "runtime" and c["status"] == "pass")
for c in bad:
    print(f"FAIL {c['part']}: {c['name']}: {c['detail']}")
if r["device"] != "ze:0":
    print(f"FAIL: checked {r['device']}, expected ze:0 (the fake driver was not picked up)")
    sys.exit(1)
if bad or runtime_pass < 20:
    print(f"FAIL: {len(bad)} ABI/runtime checks failed; {runtime_pass} runtime checks passed (expected >= 20)")
    sys.exit(1)
print(f"ok: {len(checks)} ABI and runtime checks, none failed ({runtime_pass} runtime passes)")
