"""spora.Profiler on the ze plugin over the fake Level Zero driver (fake_ze_driver.cpp: host threads, no
device; run by ctest ze_fake_driver_profiler with ZE_ENABLE_ALT_DRIVERS set). The plugin reports its
stream work through the host's trace hooks (plugins/ze/ze_trace.cpp), so the profiler's own trace of
Model.train on ze:0 has ze.kernel spans on one device track per stream ("ze: ze0-s<n>"), the device
queue's h2d copies (ze.copy) on the copy stream's track, and a flow arrow from the host to each of them
that starts no later than the span. Without a session no watcher thread starts.

The fake does not execute kernels (its outputs are NaN): what is checked is the trace, not the math
(the ze kernels' math is checked on PoCL, ze_kernels_pocl)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import spora
from spora import nn
from spora.dataset import NumpySlicesDataset, config
from spora.train import Model

WATCHER = re.compile(r"^ze\d+-s\d+$")


def train(mode):
    spora.set_context(mode=mode)
    config.set_device_queue_size(1)
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(16, 32, activation="relu"), nn.Dense(32, 3))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 16)).astype(np.float32)
    y = rng.integers(0, 3, 128).astype(np.int32)
    data = NumpySlicesDataset((x, y), shuffle=False).batch(32)
    Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9)).train(1, data)


def watcher_threads():
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            name = f.read().strip()
        if WATCHER.match(name):
            names.append(name)
    return names


@pytest.fixture(autouse=True)
def on_ze():
    assert os.environ.get("ZE_ENABLE_ALT_DRIVERS"), "run through ctest (ze_fake_driver_profiler): needs the fake driver"
    spora.set_device("ze:0")
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE)
    spora.set_device("cpu")


def test_no_session_starts_no_watcher():
    # A fresh process: once a session ran, the watchers live as long as their streams.
    code = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import spora
from test_ze_profiler import train, watcher_threads
spora.set_device("ze:0")
train(spora.PYNATIVE_MODE)
print("watchers:", watcher_threads())
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "watchers: []" in run.stdout, run.stdout


@pytest.mark.parametrize("mode", [spora.PYNATIVE_MODE, spora.GRAPH_MODE])
def test_profiler_shows_ze_work_per_stream_with_arrows(tmp_path, mode):
    with spora.Profiler(str(tmp_path), print_summary=False) as p:
        train(mode)
    assert watcher_threads(), "a session ran but no ze stream watcher thread exists"
    with open(p.trace_path) as f:
        events = json.load(f)["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    kernels = [e for e in spans if e.get("cat") == "ze.kernel"]
    copies = [e for e in spans if e.get("cat") == "ze.copy"]
    assert kernels, "no ze.kernel spans: the plugin reported no device work"
    names = {k["name"] for k in kernels}
    assert names & {"matmul", "linear"}, sorted(names)
    # The device queue copies each batch on a stream of its own.
    assert [c["name"] for c in copies].count("h2d") >= 4, [c["name"] for c in copies]
    ze = kernels + copies
    for e in ze:
        assert e["pid"] == 2 and e["dur"] >= 0
        assert re.match(r"^ze: ze0-s\d+$", tracks[(2, e["tid"])]), tracks[(2, e["tid"])]
        assert "queued_us" in e["args"]
    assert {c["tid"] for c in copies if c["name"] == "h2d"} - {k["tid"] for k in kernels}
    # One arrow per piece of ze work: from the host, at or before the launch's
    # time, to the start of the work's span on its track.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    arrows = {(e["tid"], e["ts"]): e for e in events if e["ph"] == "f" and e["pid"] == 2}
    for e in ze:
        f = arrows.get((e["tid"], e["ts"]))
        assert f is not None, f"no arrow ends at {e['cat']} {e['name']}"
        s = starts[f["id"]]
        assert s["pid"] == 1 and s["ts"] <= e["ts"]
        # The wait in the stream: from the launch until the work started.
        assert 0 <= e["args"]["queued_us"] <= e["ts"] - s["ts"] + 0.002
    assert "Device work reported by plugins" in p.summary()
