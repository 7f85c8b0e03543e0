"""spora.Profiler: Chrome trace JSON, op spans with shapes and source lines, device spans and flows,
Model.train step markers, memory counters, the summary table."""
import json
import os
import re
import sys

import numpy as np
import pytest

import spora
from spora import nn, ops
from spora.dataset import NumpySlicesDataset
from spora.train import Model

THIS_FILE = os.path.abspath(__file__)


def load_trace(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    # Trace-event format: every event has a phase, a pid and a tid; spans have a duration.
    for e in events:
        assert e["ph"] in "XCsfM", e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
    return events


def summary_rows(text):
    """{op name: (calls, self ms, self %, total ms)} of the host-op table."""
    rows = {}
    section = text.split("\n\n")[0]
    for line in section.splitlines()[2:]:
        m = re.match(r"(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)$", line)
        assert m, line
        rows[m.group(1)] = (int(m.group(2)), float(m.group(3)), float(m.group(4)), float(m.group(5)))
    return rows


def test_eager_ops_shapes_source_and_summary(tmp_path, capsys):
    x = spora.Tensor(np.ones((4, 3), np.float32))
    w = spora.Tensor(np.ones((3, 5), np.float32))
    with spora.Profiler(str(tmp_path)) as p:
        for _ in range(3):
            y = ops.matmul(x, w); line = sys._getframe().f_lineno  # noqa: E702
        z = y + y
        z.asnumpy()
    assert p.trace_path == str(tmp_path / "trace.json")
    events = load_trace(p.trace_path)
    ops_ = [e for e in events if e["ph"] == "X" and e.get("cat") == "op"]
    mm = [e for e in ops_ if e["name"] == "matmul"]
    assert len(mm) == 3 and [e["name"] for e in ops_].count("add") == 1
    for e in mm:
        assert e["dur"] > 0
        assert e["args"]["inputs"] == ["f32[4,3]", "f32[3,5]"] and e["args"]["outputs"] == ["f32[4,5]"]
        assert e["args"]["device"] == "cpu:0"
        assert e["args"]["source"] == f"{THIS_FILE}:{line}"
    # The cpu plugin reports its kernels through the trace hooks, inline on this thread, each
    # joined to its op by a flow arrow.
    kernels = [e for e in events if e["ph"] == "X" and e.get("cat") == "cpu.kernel"]
    assert [k["name"] for k in kernels].count("matmul") == 3
    flows_s = {e["id"] for e in events if e["ph"] == "s"}
    flows_f = {e["id"] for e in events if e["ph"] == "f"}
    assert len(flows_s) >= 4 and flows_s == flows_f
    # Memory counters for the device the ops ran on.
    mem = [e for e in events if e["ph"] == "C" and e["name"] == "memory cpu:0"]
    assert mem and mem[0]["args"]["allocated"] > 0 and mem[0]["args"]["reserved"] >= mem[0]["args"]["allocated"]
    # The table printed at exit counts exactly the ops that ran.
    printed = capsys.readouterr().out
    rows = summary_rows(printed)
    assert rows["matmul"][0] == 3 and rows["add"][0] == 1 and set(rows) == {"matmul", "add"}
    assert abs(sum(r[2] for r in rows.values()) - 100.0) < 0.5
    assert open(p.summary_path).read() == printed


def test_mindspore_style_start_stop_analyse(tmp_path):
    out = tmp_path / "prof.json"
    p = spora.Profiler(output_path=str(out), start_profile=False, print_summary=False)
    a = spora.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    _ = ops.exp(a)  # before start: not recorded
    p.start()
    for _ in range(2):
        _ = ops.exp(a)
    p.stop()
    _ = ops.exp(a)  # after stop: not recorded
    assert p.analyse() == str(out)
    events = load_trace(str(out))
    assert sum(1 for e in events if e["ph"] == "X" and e["name"] == "exp" and e.get("cat") == "op") == 2
    assert summary_rows(p.summary())["exp"][0] == 2
    assert os.path.exists(str(tmp_path / "prof.summary.txt"))


def test_one_session_at_a_time(tmp_path):
    with spora.Profiler(str(tmp_path), print_summary=False):
        with pytest.raises(spora.SporaValueError, match=r"\[profiler\] a session already runs"):
            spora.Profiler(str(tmp_path / "b"))


def blobs(n=64, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int32)
    x = (rng.standard_normal((n, 4)) + y[:, None]).astype(np.float32)
    return x, y


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_model_train_steps_and_graph_nodes_on_sim(tmp_path, mode):
    spora.set_device("sim:0")
    spora.set_context(mode=spora.GRAPH_MODE if mode == "graph" else spora.PYNATIVE_MODE)
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    x, y = blobs()
    data = NumpySlicesDataset((x, y), shuffle=False).batch(16)
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    with spora.Profiler(str(tmp_path), print_summary=False) as p:
        model.train(1, data)
    events = load_trace(p.trace_path)
    steps = [e for e in events if e["ph"] == "X" and e.get("cat") == "step"]
    assert [s["name"] for s in steps] == ["step 1", "step 2", "step 3", "step 4"]
    assert all(s["dur"] > 0 for s in steps)
    host = [e for e in events if e["ph"] == "X" and e.get("cat") == ("node" if mode == "graph" else "op")]
    assert any(e["name"] == "matmul" and "f32[16,4]" in e["args"]["inputs"] for e in host)
    # The steps enclose the ops of the training step.
    first = steps[0]
    assert any(first["ts"] <= e["ts"] and e["ts"] + e["dur"] <= first["ts"] + first["dur"] for e in host)
    # sim runs kernels on its stream's worker thread: device spans on their own track, each joined to
    # the op that queued it by a flow arrow that starts on the host track and ends on the kernel.
    kernels = [e for e in events if e["ph"] == "X" and e.get("cat") == "sim.kernel"]
    assert kernels and all(e["pid"] == 2 for e in kernels)
    host_tids = {e["tid"] for e in host}
    assert not {k["tid"] for k in kernels} & host_tids
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(names[(2, k["tid"])].startswith("sim: sim0-s") for k in kernels)
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = [e for e in events if e["ph"] == "f" and e["tid"] in {k["tid"] for k in kernels}]
    assert ends
    for f in ends:
        s = starts[f["id"]]
        assert s["pid"] == 1 and s["tid"] in host_tids and s["ts"] <= f["ts"]
        assert any(k["ts"] == f["ts"] and k["tid"] == f["tid"] for k in kernels)  # binds to the kernel span
    queued = [k for k in kernels if "queued_us" in k.get("args", {})]
    assert queued and all(k["args"]["queued_us"] >= 0 for k in queued)
    assert any(e["ph"] == "C" and e["name"] == "memory sim:0" for e in events)
