"""spora.communication and data-parallel training, run by ctest under
`mpirun -np 2` (every rank runs this file; each test is collective).

The data-parallel check: N ranks, each training on its shard of every batch
(NumpySlicesDataset(num_shards=N, shard_id=rank)) with gradients averaged,
must end with the same weights on every rank, equal (to float tolerance) to
one process training on the full batches."""
import numpy as np
import pytest

import spora
from spora import communication as comm
from spora import nn
from spora.dataset import NumpySlicesDataset
from spora.train import Model


@pytest.fixture(scope="module", autouse=True)
def world():
    comm.init("mpi", timeout_ms=120000)  # a failing rank must not hang the others
    yield
    spora.reset_auto_parallel_context()
    comm.release()


def rank_values(r, shape, dtype):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 7 + 3 * r - 2).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_collectives_match_numpy(dtype):
    r, n = comm.get_rank(), comm.get_group_size()
    x = spora.Tensor(rank_values(r, (3, 5), dtype))
    every = [rank_values(k, (3, 5), dtype) for k in range(n)]  # what each rank sent, computed here
    np.testing.assert_array_equal(comm.all_reduce(x).asnumpy(), np.sum(every, axis=0))
    np.testing.assert_array_equal(comm.all_reduce(x, comm.ReduceOp.MAX).asnumpy(), np.max(every, axis=0))
    np.testing.assert_array_equal(comm.all_reduce(x, "min").asnumpy(), np.min(every, axis=0))
    mean = comm.all_reduce(x, "mean").asnumpy()
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(mean, np.trunc(np.sum(every, axis=0) / n).astype(dtype))
    else:
        np.testing.assert_allclose(mean, np.mean(every, axis=0), rtol=1e-6)
    np.testing.assert_array_equal(comm.all_gather(x).asnumpy(), np.stack(every))
    for root in range(n):
        np.testing.assert_array_equal(comm.broadcast(x, root).asnumpy(), every[root])
    np.testing.assert_array_equal(x.asnumpy(), every[r])  # inputs are left alone


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="unknown reduce op 'avgg'"):
        comm.all_reduce(spora.Tensor(np.ones(2, np.float32)), "avgg")
    with pytest.raises(ValueError, match="already initialised with backend 'mpi'"):
        comm.init("nccl")
    with pytest.raises(ValueError, match="parallel_mode 'hybrid_parallel' is not supported"):
        spora.set_auto_parallel_context(parallel_mode="hybrid_parallel")
    with pytest.raises(ValueError, match="shard_id 2 is not in"):
        NumpySlicesDataset(np.zeros(4), num_shards=2, shard_id=2)


# -- data-parallel training -------------------------------------------------

def make_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 10)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    return x, y


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(10, 16, activation="relu")
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.fc1(x))


def make_net():
    """Every net starts from the same weights (same on every rank)."""
    net = Net()
    rng = np.random.default_rng(1)
    for p in net.trainable_params():
        p.set_data(spora.Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))
    return net


def weights(net):
    return [p.asnumpy() for p in net.trainable_params()]


def train(net, dataset, epochs=3):
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    model = Model(net, nn.CrossEntropyLoss(), opt)
    model.train(epochs, dataset)
    return model


@pytest.mark.parametrize("mode", [spora.PYNATIVE_MODE, spora.GRAPH_MODE], ids=["pynative", "graph"])
def test_data_parallel_equals_full_batch_training(mode):
    spora.set_context(mode=mode)
    r, n = comm.get_rank(), comm.get_group_size()
    assert n >= 2, "run under mpirun -np 2"
    x, y = make_data()
    batch = 16  # global batch: each rank gets batch // n rows of it

    # One process, full batches (every rank computes it by itself).
    spora.reset_auto_parallel_context()
    ref = make_net()
    train(ref, NumpySlicesDataset((x, y)).batch(batch))

    # The same rank's shard alone, without reduction: must differ, or this
    # test could not tell reduction from no reduction.
    alone = make_net()
    train(alone, NumpySlicesDataset((x, y), num_shards=n, shard_id=r).batch(batch // n))

    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    try:
        dp = make_net()
        model = train(dp, NumpySlicesDataset((x, y), num_shards=n, shard_id=r).batch(batch // n))
    finally:
        spora.reset_auto_parallel_context()

    for got, want, lone in zip(weights(dp), weights(ref), weights(alone)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
        assert not np.allclose(lone, want, rtol=1e-3, atol=1e-4)
        # Every rank ends with the very same weights.
        gathered = comm.all_gather(spora.Tensor(got)).asnumpy()
        for k in range(n):
            np.testing.assert_array_equal(gathered[k], got)

    if mode == spora.GRAPH_MODE:
        # The gradient average is inside the compiled train step: one
        # all_reduce per gradient, fused by the compiler into one bucket of
        # f32 gradients in backward order (passes/allreduce_fusion.cpp).
        text = model._train_step.jit.last_graph.text()
        assert text.count("all_reduce(") == 1, text
        assert model._train_step.jit.last_executable.collectives()[0] == 1


def test_jit_gradient_average():
    """spora.jit of value_and_grad + DistributedGradReducer: the averaged
    gradient of a quadratic equals the numpy mean of every rank's gradient."""
    spora.set_context(mode=spora.GRAPH_MODE)
    r, n = comm.get_rank(), comm.get_group_size()
    w = spora.Parameter(spora.Tensor(np.array([0.5, -1.0, 2.0], np.float64)), name="w")
    xs = [np.array([1.0, 2.0, 3.0]) * (k + 1) for k in range(n)]
    reducer = nn.DistributedGradReducer([w], mean=True)

    def loss_fn(x):
        return ((w * x) ** 2).sum()

    grad_fn = spora.value_and_grad(loss_fn, grad_position=None, weights=[w])

    @spora.jit
    def step(x):
        loss, grads = grad_fn(x)
        return loss, reducer(grads)[0]

    for _ in range(2):  # the second call runs the cached plan
        loss, g = step(spora.Tensor(xs[r]))
        want = np.mean([2 * w.asnumpy() * xk ** 2 for xk in xs], axis=0)  # d/dw sum((w x)^2) = 2 w x^2
        np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-12)
        np.testing.assert_allclose(loss.asnumpy(), ((w.asnumpy() * xs[r]) ** 2).sum(), rtol=1e-12)
    assert step.stats["traces"] == 1
    assert "all_reduce" in step.last_graph.text()


def test_grad_reducer_buckets_by_dtype_and_size():
    """Buckets split at dtype changes and at bucket_bytes, and the reduced
    gradients equal each rank's gradients reduced one by one (numpy)."""
    spora.set_context(mode=spora.PYNATIVE_MODE)
    r, n = comm.get_rank(), comm.get_group_size()
    shapes = [(3, 4), (5,), (2, 2), (7,), (1,)]
    dtypes = [np.float32, np.float32, np.float64, np.float64, np.float32]

    def grads_of(k):
        return [(np.arange(np.prod(s)).reshape(s) * (k + 1) + i).astype(d)
                for i, (s, d) in enumerate(zip(shapes, dtypes))]

    params = [spora.Parameter(spora.Tensor(g), name=f"p{i}") for i, g in enumerate(grads_of(0))]
    reducer = nn.DistributedGradReducer(params, mean=False, bucket_bytes=40)
    # f32 (48 B) alone: over 40 B; f32 (20 B); f64 32 B + 56 B > 40: split; f32.
    assert reducer._buckets([spora.Tensor(g) for g in grads_of(r)]) == [[0], [1], [2], [3], [4]]
    reducer = nn.DistributedGradReducer(params, mean=True)
    assert reducer._buckets([spora.Tensor(g) for g in grads_of(r)]) == [[0, 1], [2, 3], [4]]
    out = reducer([spora.Tensor(g) for g in grads_of(r)])
    for i, got in enumerate(out):
        want = np.mean([grads_of(k)[i] for k in range(n)], axis=0)
        assert got.shape == shapes[i] and got.dtype == spora.Tensor(grads_of(0)[i]).dtype
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


def test_gradient_through_all_reduce():
    """d/dx sum(all_reduce_sum(x * x)) on rank r is size * 2 x_r (the
    incoming gradient, 1, is all-reduced) under jit; PyNative refuses
    rather than return a gradient that ignores the collective."""
    r, n = comm.get_rank(), comm.get_group_size()
    x = spora.Tensor(np.array([1.0, -2.0, 0.5]) * (r + 1))

    def f(t):
        return comm.all_reduce(t * t).sum()

    spora.set_context(mode=spora.PYNATIVE_MODE)
    with pytest.raises(RuntimeError, match="would not be differentiated"):
        spora.grad(f)(x)
    g = spora.jit(spora.grad(f))(x)
    np.testing.assert_allclose(g.asnumpy(), n * 2 * x.asnumpy(), rtol=1e-12)


# -- the profiler -----------------------------------------------------------

def test_profiler_records_collectives(tmp_path):
    import json
    r, n = comm.get_rank(), comm.get_group_size()
    x = spora.Tensor(np.ones((4, 8), np.float32))
    with spora.Profiler(str(tmp_path / f"prof{r}.json"), print_summary=False) as p:
        comm.all_reduce(x)
        comm.all_gather(x)
    with open(p.trace_path) as f:
        events = json.load(f)["traceEvents"]
    coll = {e["name"]: e for e in events if e["ph"] == "X" and e.get("cat") == "collective"}
    assert set(coll) == {"all_reduce", "all_gather"}
    for e in coll.values():
        assert e["dur"] > 0 and e["args"]["bytes"] == 4 * 8 * 4 and e["args"]["rank"] == r
        assert e["args"]["group"].endswith(f"(mpi, {n} ranks)")
