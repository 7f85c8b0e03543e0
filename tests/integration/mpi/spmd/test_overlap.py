"""Gradient all-reduces overlapped with backward (issue 17, lines 3 and 5),
on 2 and 4 ranks: with small buckets every layer's gradients are reduced as
soon as backward has made them, while backward goes on; the compiled step
says how many collectives overlap, and the trained weights equal one
process training on the full batches, and (bit for bit) the same step with
overlap off."""
import numpy as np

import spora
from spora import communication as comm
from spora import nn
from spora.dataset import NumpySlicesDataset
from spora.train import Model


class Deep(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layers = nn.SequentialCell([nn.Dense(12, 16, activation="relu"), nn.Dense(16, 16, activation="relu"),
                                         nn.Dense(16, 16, activation="relu"), nn.Dense(16, 3)])

    def construct(self, x):
        return self.layers(x)


def make_net():
    net = Deep()
    rng = np.random.default_rng(1)
    for p in net.trainable_params():
        p.set_data(spora.Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))
    return net


def train(dataset):
    net = make_net()
    model = Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9))
    model.train(2, dataset)
    return [p.asnumpy() for p in net.trainable_params()], model


def test_overlapped_gradient_buckets_equal_one_process(monkeypatch):
    r, n = comm.get_rank(), comm.get_group_size()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 12)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    batch = 16
    ref, _ = train(NumpySlicesDataset((x, y)).batch(batch))

    # ~100 bytes: every gradient is a bucket of its own.
    monkeypatch.setenv("SPORA_ALLREDUCE_BUCKET_MB", "0.0001")
    spora.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    shard = NumpySlicesDataset((x, y), num_shards=n, shard_id=r).batch(batch // n)
    monkeypatch.setenv("SPORA_COMM_OVERLAP", "1")
    on, model_on = train(shard)
    monkeypatch.setenv("SPORA_COMM_OVERLAP", "0")
    off, model_off = train(NumpySlicesDataset((x, y), num_shards=n, shard_id=r).batch(batch // n))

    total, overlapped = model_on._train_step.jit.last_executable.collectives()
    assert total == 8, total  # 4 weights, 4 biases
    # Each starts as soon as its gradient exists; only the ones made last
    # (the first layer's) may have nothing left to overlap.
    assert overlapped >= 6, (total, overlapped)
    assert model_off._train_step.jit.last_executable.collectives() == (8, 0)
    for got, same, want in zip(on, off, ref):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
        gathered = comm.all_gather(spora.Tensor(got)).asnumpy()
        for k in range(n):
            np.testing.assert_array_equal(gathered[k], got)
