"""spora.Profiler on a real GPU (issue 20 line 1): the cuda plugin reports its device work through the
host's trace hooks (plugins/cuda/gpu_trace.cpp), so a trace of Model.train on cuda has kernel spans on
one device track per stream ("cuda: cuda0-s<n>"), flow arrows from the host ops that launched them,
the dataset's device queue copies (issue 20 line 2) on the copy stream's track, and the summary lists
the device work. Also: training through the device queue equals training without it, bit for bit.

Run by ctest (gpu_python) for the GPU plugins that were built (SPORA_GPU_PLUGINS); on a machine
without the device each test skips with "no device: <the plugin's reason>"."""
import json
import os

import numpy as np
import pytest

import spora
from spora import nn
from spora.dataset import NumpySlicesDataset, config
from spora.train import Model
from spora.train.callbacks import Callback

BUILT = [p for p in os.environ.get("SPORA_GPU_PLUGINS", "").split(",") if p]


def device_or_skip(name):
    if name not in BUILT:
        pytest.skip(f"no device: the {name} plugin was not built (SPORA_GPU_PLUGINS={','.join(BUILT)})")
    try:
        spora.set_device(name + ":0")
    except spora.SporaError as e:
        spora.set_device("cpu")
        msg = str(e)
        reason = msg[msg.index("no device: "):] if "no device: " in msg else msg
        pytest.skip(reason if reason.startswith("no device: ") else "no device: " + reason)


def blobs(n=256, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int32)
    x = (rng.standard_normal((n, 16)) + y[:, None]).astype(np.float32)
    return x, y


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_step_end(self, run_context):
        self.values.append(run_context.original_args().net_outputs)


def train(mode, depth):
    before = config.get_device_queue_size()
    config.set_device_queue_size(depth)
    try:
        spora.set_context(mode=mode)
        nn.init.set_seed(0)
        net = nn.SequentialCell(nn.Dense(16, 64, activation="relu"), nn.Dense(64, 3))
        x, y = blobs()
        data = NumpySlicesDataset((x, y), shuffle=False).batch(32)
        losses = Losses()
        model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
        model.train(1, data, callbacks=[losses])
        return losses.values, [p.asnumpy() for p in net.trainable_params()]
    finally:
        config.set_device_queue_size(before)
        spora.set_context(mode=spora.PYNATIVE_MODE)


@pytest.mark.parametrize("name", ["cuda", "rocm"])
@pytest.mark.parametrize("mode", [spora.PYNATIVE_MODE, spora.GRAPH_MODE])
def test_profiler_shows_device_work_per_stream(tmp_path, name, mode):
    device_or_skip(name)
    with spora.Profiler(str(tmp_path), print_summary=False) as p:
        train(mode, 1)
    with open(p.trace_path) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    kernels = [e for e in spans if e.get("cat") == f"{name}.kernel"]
    assert kernels, f"no {name}.kernel spans: the plugin reported no device work"
    assert all(e["pid"] == 2 and e["dur"] >= 0 for e in kernels)
    assert any(e["dur"] > 0 for e in kernels)
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(tracks[(2, k["tid"])].startswith(f"{name}: {name}0-s") for k in kernels)
    # Kernels of the training step: matmuls (Dense) in PyNative, graph steps in graph mode.
    assert any("matmul" in k["name"] or "dense" in k["name"] or k["name"] == "graph replay" for k in kernels), \
        sorted({k["name"] for k in kernels})
    # Flow arrows: each starts on the host (pid 1) and ends where a device span starts.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = [e for e in events if e["ph"] == "f" and e["pid"] == 2]
    assert ends
    for f in ends:
        s = starts[f["id"]]
        assert s["pid"] == 1 and s["ts"] <= f["ts"]
        assert any(d["ts"] == f["ts"] and d["tid"] == f["tid"] and d["pid"] == 2 for d in spans)
    assert any("queued_us" in k.get("args", {}) for k in kernels)
    # The device queue's copies: host spans per batch, and h2d copies on a stream of their own.
    assert [e["args"]["batch"] for e in spans if e.get("cat") == "dataset"][:3] == [1, 2, 3]
    h2d = [e for e in spans if e.get("cat") == f"{name}.copy" and e["name"] == "h2d"]
    assert h2d and {e["tid"] for e in h2d} - {k["tid"] for k in kernels}
    assert "Device work reported by plugins" in p.summary()


@pytest.mark.parametrize("name", ["cuda", "rocm"])
def test_device_queue_training_equals_training_without_it(name):
    device_or_skip(name)
    for mode in (spora.PYNATIVE_MODE, spora.GRAPH_MODE):
        base_losses, base_params = train(mode, 0)
        losses, params = train(mode, 2)
        assert losses == base_losses
        for a, b in zip(params, base_params):
            np.testing.assert_array_equal(a, b)
