"""The dataset's device queue (spora_dataset_iter_set_device_queue): on a device with its own memory
(the strict simulated GPU, sim), the next batch's host->device copy is enqueued on the copy stream
when the current batch is handed out, so it overlaps the step; results equal copying each batch when
it is taken; a pipeline error still reaches the caller at the batch that failed."""
import json

import numpy as np
import pytest

import spora
from spora import nn
from spora.dataset import NumpySlicesDataset, config, transforms
from spora.train import Model
from spora.train.callbacks import Callback


@pytest.fixture
def queue_size():
    """Restores the device queue setting after the test."""
    before = config.get_device_queue_size()
    yield config.set_device_queue_size
    config.set_device_queue_size(before)


def blobs(n=96, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int32)
    x = (rng.standard_normal((n, 4)) + y[:, None]).astype(np.float32)
    return x, y


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_step_end(self, run_context):
        self.values.append(run_context.original_args().net_outputs)


def train_on_sim(mode, depth, queue_size):
    queue_size(depth)
    spora.set_device("sim:0")
    spora.set_context(mode=mode)
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    x, y = blobs()
    data = NumpySlicesDataset((x, y), shuffle=False).batch(8)
    losses = Losses()
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    model.train(2, data, callbacks=[losses])
    return losses.values, [p.asnumpy() for p in net.trainable_params()]


@pytest.mark.parametrize("mode", [spora.PYNATIVE_MODE, spora.GRAPH_MODE])
def test_training_equals_the_run_without_the_queue(mode, queue_size):
    base_losses, base_params = train_on_sim(mode, 0, queue_size)
    assert len(base_losses) == 24
    for depth in (1, 3):
        losses, params = train_on_sim(mode, depth, queue_size)
        assert losses == base_losses
        for a, b in zip(params, base_params):
            np.testing.assert_array_equal(a, b)


def test_batches_equal_the_pipeline_and_live_on_the_device(queue_size):
    spora.set_device("sim:0")
    x, y = blobs(20)
    ds = NumpySlicesDataset((x, y), shuffle=False).batch(6)
    for depth in (0, 1, 4):
        queue_size(depth)
        got = list(ds)
        assert len(got) == 4
        for i, (bx, by) in enumerate(got):
            assert bx.device == by.device and "sim" in str(bx.device)
            np.testing.assert_array_equal(bx.asnumpy(), x[6 * i:6 * i + 6])
            np.testing.assert_array_equal(by.asnumpy(), y[6 * i:6 * i + 6])


def test_next_batch_copy_is_enqueued_before_the_step_ends(tmp_path, queue_size):
    queue_size(1)
    spora.set_device("sim:0")
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    x, y = blobs(40)
    data = NumpySlicesDataset((x, y), shuffle=False).batch(8)
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    with spora.Profiler(str(tmp_path), print_summary=False) as p:
        model.train(1, data)
    with open(p.trace_path) as f:
        events = json.load(f)["traceEvents"]
    steps = sorted((e for e in events if e["ph"] == "X" and e.get("cat") == "step"), key=lambda e: e["ts"])
    copies = sorted((e for e in events if e["ph"] == "X" and e.get("cat") == "dataset"), key=lambda e: e["ts"])
    assert len(steps) == 5 and len(copies) == 5
    assert [c["args"]["batch"] for c in copies] == [1, 2, 3, 4, 5]
    assert all(c["args"]["device"] == "sim:0" and c["args"]["bytes"] >= 8 * 4 * 4 for c in copies)
    # Batch k+1's copy was enqueued before step k began (so before it ended): it runs on the copy
    # stream while step k runs on the compute stream.
    for k in range(4):
        nxt = copies[k + 1]
        assert nxt["ts"] + nxt["dur"] <= steps[k]["ts"], (k, nxt, steps[k])
    # The copies themselves ran on sim's copy engine, off the kernels' stream.
    h2d = [e for e in events if e["ph"] == "X" and e.get("cat") == "sim.copy" and e["name"] == "h2d"]
    kernel_tids = {e["tid"] for e in events if e["ph"] == "X" and e.get("cat") == "sim.kernel"}
    assert len(h2d) >= 10 and kernel_tids and not {e["tid"] for e in h2d} & kernel_tids


def test_without_the_queue_nothing_is_copied_ahead(tmp_path, queue_size):
    queue_size(0)
    spora.set_device("sim:0")
    x, y = blobs(16)
    with spora.Profiler(str(tmp_path), print_summary=False) as p:
        for _ in NumpySlicesDataset((x, y), shuffle=False).batch(8):
            pass
    with open(p.trace_path) as f:
        events = json.load(f)["traceEvents"]
    assert not [e for e in events if e.get("cat") == "dataset"]


def failing_labels(n=48, bad=40):
    """Labels whose sample `bad` is out of range for OneHot(3): the pipeline fails on it. map()
    transforms rows in chunks of 16; 40 is inside the third, after rows of it that are fine."""
    x, y = blobs(n)
    y = y.copy()
    y[bad] = 7
    return x, y


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_pipeline_error_surfaces_at_the_failing_batch(depth, queue_size):
    queue_size(depth)
    spora.set_device("sim:0")
    x, y = failing_labels()
    ds = NumpySlicesDataset((x, y), ["data", "label"], shuffle=False).map(transforms.OneHot(3), "label").batch(4)
    seen = []
    with pytest.raises(spora.SporaValueError, match=r"one_hot\] label 7 is outside \[0, 3\)"):
        for bx, _ in ds:
            seen.append(bx.asnumpy())
    # Sample 40 is in the eleventh batch: the ten before it arrive, whatever was copied ahead.
    assert len(seen) == 10
    np.testing.assert_array_equal(seen[-1], x[36:40])


def test_pipeline_error_reaches_model_train_within_one_step(queue_size):
    queue_size(1)
    spora.set_device("sim:0")
    nn.init.set_seed(0)
    x, y = failing_labels()
    ds = (NumpySlicesDataset((x, y), ["data", "label"], shuffle=False)
          .map([transforms.OneHot(3), transforms.TypeCast(np.float32)], "label").batch(4))
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    losses = Losses()
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=False, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.05, 0.9))
    with pytest.raises(spora.SporaValueError, match=r"one_hot\] label 7"):
        model.train(1, ds, callbacks=[losses])
    assert len(losses.values) == 10


def test_device_queue_size_is_checked():
    with pytest.raises(ValueError, match=r"device_queue_size must be in \[0, 64\], got 65"):
        config.set_device_queue_size(65)
    with pytest.raises(ValueError, match=r"got -1"):
        config.set_device_queue_size(-1)
