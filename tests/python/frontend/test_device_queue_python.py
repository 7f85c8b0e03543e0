"""The device queue for pipelines with a Python step (GeneratorDataset, a Python function in map,
worker processes): on the strict simulated GPU (sim) the next batch's host->device copy is enqueued on
the copy stream when the current batch is handed out (spora._C.DeviceQueue over
spora_device_queue_*); training gives the same losses and parameters as copying each batch when it
is taken; an exception in the user's code reaches the loop at the batch that failed, with its
traceback, whatever the depth."""
import json
import traceback

import numpy as np
import pytest

import spora
from spora import nn
from spora.dataset import GeneratorDataset, NumpySlicesDataset, config
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


class Samples:
    """A random-access source (__getitem__ / __len__)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def scale(v):
    return v * np.float32(0.5)


def pipelines(x, y):
    """name -> a function making the batched pipeline, each with a Python step."""
    def generator():
        for a, b in zip(x, y):
            yield a, b
    return {
        "generator": lambda: GeneratorDataset(generator, ["data", "label"], shuffle=False).batch(8),
        "random_access": lambda: GeneratorDataset(Samples(x, y), ["data", "label"], shuffle=False,
                                                  num_parallel_workers=2, python_multiprocessing=False).batch(8),
        "python_map": lambda: NumpySlicesDataset((x, y), ["data", "label"], shuffle=False)
        .map(scale, "data", num_parallel_workers=2).batch(8),
    }


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_step_end(self, run_context):
        self.values.append(run_context.original_args().net_outputs)


def train_on_sim(make, mode, depth, queue_size):
    queue_size(depth)
    spora.set_device("sim:0")
    spora.set_context(mode=mode)
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    losses = Losses()
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    model.train(2, make(), callbacks=[losses])
    return losses.values, [p.asnumpy() for p in net.trainable_params()]


@pytest.mark.parametrize("mode", [spora.PYNATIVE_MODE, spora.GRAPH_MODE])
@pytest.mark.parametrize("source", ["generator", "random_access", "python_map"])
def test_training_equals_the_run_without_the_queue(source, mode, queue_size):
    x, y = blobs()
    make = pipelines(x, y)[source]
    base_losses, base_params = train_on_sim(make, mode, 0, queue_size)
    assert len(base_losses) == 24
    for depth in (1, 3):
        losses, params = train_on_sim(make, mode, depth, queue_size)
        assert losses == base_losses
        for a, b in zip(params, base_params):
            np.testing.assert_array_equal(a, b)


def test_batches_and_columns_the_queue_does_not_carry(queue_size):
    """Numeric columns come from the queue (on sim); strings and unread columns come out as without it."""
    spora.set_device("sim:0")
    x, _ = blobs(10)
    rows = [(x[i], f"s{i}", np.int16(i)) for i in range(10)]
    d = GeneratorDataset(rows, ["data", "name", "small"], shuffle=False)
    for depth in (0, 1, 4):
        queue_size(depth)
        got = list(d.batch(4).create_tuple_iterator(columns=["data", "name"]))
        assert len(got) == 3
        for k, (bx, names) in enumerate(got):
            assert "sim" in str(bx.device)
            np.testing.assert_array_equal(bx.asnumpy(), x[4 * k:4 * k + 4])
            assert names.asnumpy().tolist() == [f"s{i}" for i in range(4 * k, min(4 * k + 4, 10))]
        # An unread int16 column stays NumPy; read, it is refused at its row.
        with pytest.raises(TypeError, match="column 'small' is int16"):
            list(d.create_tuple_iterator())


def test_next_batch_copy_is_enqueued_before_the_step_begins(tmp_path, queue_size):
    queue_size(1)
    spora.set_device("sim:0")
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    x, y = blobs(40)
    data = pipelines(x, y)["python_map"]()
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
    # Batch k+1's copy was enqueued before step k began: it runs on the copy stream while step k runs.
    for k in range(4):
        nxt = copies[k + 1]
        assert nxt["ts"] + nxt["dur"] <= steps[k]["ts"], (k, nxt, steps[k])
    h2d = [e for e in events if e["ph"] == "X" and e.get("cat") == "sim.copy" and e["name"] == "h2d"]
    kernel_tids = {e["tid"] for e in events if e["ph"] == "X" and e.get("cat") == "sim.kernel"}
    assert len(h2d) >= 10 and kernel_tids and not {e["tid"] for e in h2d} & kernel_tids


def test_without_the_queue_or_on_cpu_nothing_is_copied_ahead(tmp_path, queue_size):
    x, y = blobs(16)
    for device, depth in (("sim:0", 0), ("cpu", 1)):
        queue_size(depth)
        spora.set_device(device)
        with spora.Profiler(str(tmp_path / device.replace(":", "")), print_summary=False) as p:
            got = [bx.asnumpy() for bx, _ in pipelines(x, y)["generator"]()]
        with open(p.trace_path) as f:
            events = json.load(f)["traceEvents"]
        assert not [e for e in events if e.get("cat") == "dataset"]
        np.testing.assert_array_equal(np.concatenate(got), x)


def failing_sample(i):
    if i == 41:
        raise KeyError(f"no sample {i}")  # the user's line
    return np.full((4,), i, np.float32), np.int32(i % 3)


FAILING_LINE = failing_sample.__code__.co_firstlineno + 2


def failing_generator():
    for i in range(48):
        yield failing_sample(i)


def failing_map(v):
    return failing_sample(int(v))


def failing_pipeline(kind):
    """48 rows in batches of 4; row 41 fails, in the eleventh batch."""
    if kind == "generator":
        return GeneratorDataset(failing_generator, ["data", "label"], shuffle=False).batch(4)
    procs = kind == "map_processes"
    return (GeneratorDataset(list(range(48)), "v", shuffle=False)
            .map(failing_map, "v", ["data", "label"], num_parallel_workers=2, python_multiprocessing=procs)
            .batch(4))


@pytest.mark.parametrize("kind", ["generator", "map_threads", "map_processes"])
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_a_user_error_reaches_the_loop_at_its_batch_with_its_traceback(kind, depth, queue_size):
    queue_size(depth)
    spora.set_device("sim:0")
    seen = []
    with pytest.raises(KeyError, match="no sample 41") as info:
        for bx, _ in failing_pipeline(kind):
            seen.append(bx.asnumpy())
    # Row 41 is in the eleventh batch: the ten before it arrive, whatever was copied ahead.
    assert len(seen) == 10
    np.testing.assert_array_equal(seen[-1][:, 0], [36, 37, 38, 39])
    text = "".join(traceback.format_exception(info.value))
    assert f"line {FAILING_LINE}, in failing_sample" in text and "raise KeyError" in text


def test_a_user_error_reaches_model_train_within_one_step(queue_size):
    queue_size(3)
    spora.set_device("sim:0")
    nn.init.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8, activation="relu"), nn.Dense(8, 3))
    losses = Losses()
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    with pytest.raises(KeyError, match="no sample 41") as info:
        model.train(1, failing_pipeline("map_threads"), callbacks=[losses])
    assert len(losses.values) == 10
    assert f"line {FAILING_LINE}, in failing_sample" in "".join(traceback.format_exception(info.value))


def test_stopping_early_and_starting_again(queue_size):
    queue_size(3)
    spora.set_device("sim:0")
    x, y = blobs(64)
    d = pipelines(x, y)["python_map"]()
    for k, _ in enumerate(d):
        if k == 1:
            break  # three batches copied ahead are dropped with the queue
    got = np.concatenate([bx.asnumpy() for bx, _ in d])
    np.testing.assert_array_equal(got, x * np.float32(0.5))


def test_kernels_wait_for_the_copy_and_staging_waits_for_its_copy():
    """spora._C.DeviceQueue directly, with nothing between push and use. Under ctest the sim device
    runs SPORA_SIM_LAG_US behind the host, so a copy has not run yet when the host goes on: a kernel
    enqueued after pop() sees the batch only because the compute stream waits for its event (the
    host waits for the compute stream alone here, which does not hurry the copy stream), and a
    staging buffer refilled before its copy ran would change the batch that copy was sending."""
    from spora import _C, ops, runtime
    spora.set_device("sim:0")
    q = _C.device_queue("")
    for b in range(1, 21):
        q.push([np.full((1000,), b, np.float32)])
        (t,) = q.pop()
        y = ops.relu(t)
        runtime.synchronize()  # the compute stream only
        np.testing.assert_array_equal(y.asnumpy(), np.full((1000,), b, np.float32), err_msg=f"batch {b}")
    got = []
    for b in range(8):  # staging buffers are reused from the third batch on
        q.push([np.full((1000,), b, np.int32)])
        got.append(q.pop()[0])
    assert q.pending == 0
    for b, t in enumerate(got):
        np.testing.assert_array_equal(t.asnumpy(), np.full((1000,), b, np.int32), err_msg=f"batch {b}")
    assert _C.device_queue("cpu") is None
