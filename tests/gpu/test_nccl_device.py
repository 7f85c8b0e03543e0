"""NCCL from the core (issue 17 line 1): a communicator bound to the cuda
device the process trains on, collectives on device tensors on its streams,
graph-mode data-parallel training with the gradient buckets on the
communication stream. One rank, on a machine with a GPU (the device checks
run it there); skipped where cuda or nccl is unavailable, except the checks
that need no GPU."""
import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import nn
from spora.dataset import NumpySlicesDataset
from spora.train import Model


def available(name):
    try:
        spora.set_device(name)
        return True
    except Exception:  # noqa: BLE001 - any refusal means: not here
        return False
    finally:
        spora.set_device("cpu")


HAVE_CUDA = available("cuda")


@pytest.fixture
def nccl_world():
    if not HAVE_CUDA:
        pytest.skip("no cuda device here")
    spora.set_context(device_target="cuda")
    try:
        comm.init()  # no backend: nccl on cuda
    except spora.SporaError as e:
        spora.set_context(device_target="cpu")
        pytest.skip(f"nccl unavailable: {e}")
    yield
    comm.release()
    spora.set_context(device_target="cpu", mode=spora.PYNATIVE_MODE)
    spora.reset_auto_parallel_context()


def test_nccl_on_a_cpu_device_says_what_to_write():
    spora.set_context(device_target="cpu")
    with pytest.raises(Exception, match=r"nccl|no nccl|unknown collective backend|cuda"):
        comm.init("nccl")
    comm.release()
    with pytest.raises(ValueError, match="no Ascend backend"):
        comm.init("hccl")


def test_eager_collectives_on_device_tensors(nccl_world):
    assert comm.get_group_size() == 1
    assert comm._world.device == "cuda:0"
    x = spora.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="cuda")
    n = comm.get_group_size()
    np.testing.assert_array_equal(comm.all_reduce(x).asnumpy(), x.asnumpy() * n)
    np.testing.assert_array_equal(comm.all_reduce(x, comm.ReduceOp.MAX).asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(comm.all_gather(x).asnumpy(), x.asnumpy()[None])
    np.testing.assert_array_equal(comm.broadcast(x, 0).asnumpy(), x.asnumpy())
    comm.barrier()
    # A host tensor is refused, naming the device to move it to.
    with pytest.raises(Exception, match="cuda:0"):
        comm.all_reduce(spora.Tensor(np.ones(3, np.float32), device="cpu"))


class Deep(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layers = nn.SequentialCell([nn.Dense(12, 32, activation="relu"), nn.Dense(32, 32, activation="relu"),
                                         nn.Dense(32, 3)])

    def construct(self, x):
        return self.layers(x)


def train(device, data_parallel):
    spora.set_context(device_target=device, mode=spora.GRAPH_MODE)
    if data_parallel:
        spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    net = Deep()
    rng = np.random.default_rng(1)
    for p in net.trainable_params():
        p.set_data(spora.Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32), device=device))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 12)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9))
    model.train(2, NumpySlicesDataset((x, y)).batch(16))
    spora.reset_auto_parallel_context()
    return [p.asnumpy() for p in net.trainable_params()], model


def test_graph_collective_runs_on_the_communication_stream(nccl_world, monkeypatch):
    """A graph's all_reduce whose result is read last starts on the comm
    stream after an event of the compute stream, the matmuls run beside it,
    and the add waits for its done event; off, it runs in line."""
    spora.set_context(mode=spora.GRAPH_MODE)
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal((512, 512)).astype(np.float32)
    b_np = (rng.standard_normal((512, 512)) / 16).astype(np.float32)
    n = comm.get_group_size()
    want = a_np * 2 * n + (b_np.astype(np.float64) @ b_np @ b_np).sum()
    for overlap, expect in (("1", (1, 1)), ("0", (1, 0))):
        monkeypatch.setenv("SPORA_COMM_OVERLAP", overlap)

        @spora.jit
        def f(a, b):
            r = comm.all_reduce(a * 2.0)
            z = spora.ops.matmul(spora.ops.matmul(b, b), b)
            return r + z.sum()

        a, b = spora.Tensor(a_np, device="cuda"), spora.Tensor(b_np, device="cuda")
        for _ in range(3):  # the later runs reuse the plan and its events
            np.testing.assert_allclose(f(a, b).asnumpy(), want, rtol=2e-3, atol=2e-3)
        assert f.last_executable.collectives() == expect


def test_graph_data_parallel_on_nccl_equals_cpu(nccl_world, monkeypatch):
    monkeypatch.setenv("SPORA_ALLREDUCE_BUCKET_MB", "0.0001")  # a bucket per gradient
    got, model = train("cuda", True)
    total, overlapped = model._train_step.jit.last_executable.collectives()
    if comm.get_group_size() == 1:
        assert total == 0  # one rank: nothing to reduce
    else:
        assert total == 6 and overlapped >= 4, (total, overlapped)  # on the communication stream
    want, _ = train("cpu", False)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
