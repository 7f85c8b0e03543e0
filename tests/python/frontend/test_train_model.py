"""spora.train.Model: training in both modes, callbacks, metrics, datasets."""
import io
import os

import numpy as np
import pytest

import spora
from spora import nn
from spora.dataset import NumpySlicesDataset
from spora.train import (Accuracy, Callback, CheckpointConfig, EarlyStopping, History, Loss, LossMonitor, Model,
                         ModelCheckpoint, TimeMonitor)
from nn_testutil import np_


@pytest.fixture(autouse=True)
def _pynative():
    spora.set_context(mode=spora.PYNATIVE_MODE)
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE)


def blobs(n=240, seed=0):
    """Three Gaussian blobs in 4-D: linearly separable up to a few points."""
    rng = np.random.default_rng(seed)
    centers = np.array([[2, 0, 0, 1], [-2, 1, 0, -1], [0, -2, 2, 0]], np.float32)
    y = rng.integers(0, 3, n).astype(np.int32)
    x = centers[y] + 0.5 * rng.standard_normal((n, 4)).astype(np.float32)
    return x, y


class MLP(nn.Cell):
    def __init__(self, dropout=0.0, bn=False):
        super().__init__()
        self.fc1 = nn.Dense(4, 16, activation="relu")
        self.bn = nn.BatchNorm1d(16) if bn else nn.Identity()
        self.drop = nn.Dropout(p=dropout) if dropout else nn.Identity()
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.drop(self.bn(self.fc1(x))))


def train_once(mode, epochs=8, batch=32, seed=0, bn=False, callbacks=None, opt="momentum"):
    spora.set_context(mode=mode)
    nn.init.set_seed(seed)
    net = MLP(bn=bn)
    x, y = blobs()
    data = NumpySlicesDataset((x, y), shuffle=True, seed=seed).batch(batch)  # 240 = 7*32 + 16
    optimizer = (nn.Momentum(net.trainable_params(), 0.05, 0.9) if opt == "momentum"
                 else nn.Adam(net.trainable_params(), 0.01))
    model = Model(net, nn.CrossEntropyLoss(), optimizer, metrics={"accuracy", "loss"})
    hist = model.train(epochs, data, callbacks=callbacks)
    return model, net, hist, data


@pytest.mark.parametrize("bn", [False, True])
def test_train_reaches_low_loss_and_modes_agree(bn):
    runs = {}
    for mode in (spora.PYNATIVE_MODE, spora.GRAPH_MODE):
        model, net, hist, data = train_once(mode, bn=bn)
        runs[mode] = (hist, [np_(p) for p in net.get_parameters()], model.eval(data))
    hist_e, params_e, ev_e = runs[spora.PYNATIVE_MODE]
    hist_g, params_g, ev_g = runs[spora.GRAPH_MODE]
    assert hist_e[-1]["loss"] < 0.1 * hist_e[0]["loss"] and hist_e[-1]["loss"] < 0.1
    assert ev_e["accuracy"] > 0.97
    for a, b in zip(hist_e, hist_g):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-6)
    for a, b in zip(params_e, params_g):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert ev_e["accuracy"] == ev_g["accuracy"]
    assert ev_e["loss"] == pytest.approx(ev_g["loss"], rel=1e-4)


def test_graph_mode_step_is_one_compiled_graph_per_batch_shape():
    model, *_ = train_once(spora.GRAPH_MODE, epochs=2)
    stats = model._train_step.jit.stats
    assert stats["traces"] == 2          # batch 32 and the last batch of 16
    assert stats["hits"] == 2 * 8 - 2     # 8 batches per epoch
    assert stats["eager_calls"] == 0


def test_eval_and_predict():
    model, net, _, data = train_once(spora.PYNATIVE_MODE, epochs=4, opt="adam")
    x, y = blobs(seed=1)
    logits = np_(model.predict(x))
    assert logits.shape == (240, 3)
    acc = (logits.argmax(1) == y).mean()
    res = model.eval(NumpySlicesDataset((x, y)).batch(50))
    assert res["accuracy"] == pytest.approx(acc)
    lp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    assert res["loss"] == pytest.approx(-lp[np.arange(240), y].mean(), rel=1e-4)


def test_metrics_by_hand():
    acc = Accuracy()
    acc.update(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), np.array([1, 1, 1]))
    acc.update(np.array([[0.0, 1.0]]), np.array([[0, 1]]))  # one-hot labels
    assert acc.eval() == pytest.approx(3 / 4)
    loss = Loss()
    loss.update(2.0, 3)
    loss.update(np.array(1.0), 1)
    assert loss.eval() == pytest.approx(7 / 4)
    with pytest.raises(RuntimeError):
        Accuracy().eval()


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def on_train_begin(self, rc):
        self.events.append("begin")

    def on_train_epoch_begin(self, rc):
        self.events.append(f"epoch{rc.original_args().cur_epoch_num}")

    def on_train_step_end(self, rc):
        p = rc.original_args()
        assert np.isfinite(p.net_outputs) and p.batch_size in (32, 16)

    def on_train_end(self, rc):
        self.events.append("end")


def test_callback_order_history_and_monitors():
    rec, hist = Recorder(), History()
    out = io.StringIO()
    tm = TimeMonitor(stream=out)
    train_once(spora.PYNATIVE_MODE, epochs=3, callbacks=[rec, hist, LossMonitor(stream=out), tm])
    assert rec.events == ["begin", "epoch1", "epoch2", "epoch3", "end"]
    assert hist.epoch == [1, 2, 3] and len(hist.history["loss"]) == 3
    assert hist.history["loss"][2] < hist.history["loss"][0]
    lines = out.getvalue().splitlines()
    # not a terminal: one LossMonitor line and one TimeMonitor line per epoch, no carriage returns
    assert sum(line.startswith("epoch 1/3: loss ") for line in lines) == 1
    assert all("samples/s" in line for line in lines if line.startswith("epoch ") and "/3:" in line)
    assert len(tm.epoch_times) == 3 and "\r" not in out.getvalue()


def test_loss_monitor_draws_in_place_on_a_tty():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    out = Tty()
    train_once(spora.PYNATIVE_MODE, epochs=1, callbacks=[LossMonitor(stream=out, refresh=0.0)])
    text = out.getvalue()
    assert text.count("\r") >= 8 and "[" in text and "8/8" in text and text.endswith("\n")


def test_early_stopping_stops_and_restores_best():
    x, y = blobs()
    train = NumpySlicesDataset((x, y)).batch(240)
    nn.init.set_seed(0)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 5.0), metrics={"loss"})

    class Spy(Callback):
        def __init__(self):
            self.weights = []

        def on_train_epoch_end(self, rc):
            self.weights.append(np_(net.fc1.weight).copy())
    spy = Spy()
    # lr 5 diverges: eval_loss rises after the first epochs, so training stops early
    es = EarlyStopping(monitor="eval_loss", patience=1, restore_best_weights=True)
    hist = model.train(30, train, callbacks=[spy, es], valid_dataset=train)
    assert es.stopped_epoch == len(hist) < 30
    best = int(np.nanargmin([h["eval_loss"] for h in hist]))
    assert es.best_epoch == best + 1
    np.testing.assert_array_equal(np_(net.fc1.weight), spy.weights[best])
    with pytest.raises(KeyError, match="eval_accuracy"):
        Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1)).train(
            1, train, callbacks=[EarlyStopping(monitor="eval_accuracy")])


def test_model_checkpoint_keeps_the_newest_files_and_they_load(tmp_path):
    ck = ModelCheckpoint(prefix="mlp", directory=tmp_path, config=CheckpointConfig(keep_checkpoint_max=2))
    model, net, _, _ = train_once(spora.PYNATIVE_MODE, epochs=4, callbacks=[ck])
    files = sorted(os.listdir(tmp_path))
    assert files == ["mlp-3_8.ckpt", "mlp-4_8.ckpt"]
    assert ck.latest == str(tmp_path / "mlp-4_8.ckpt")
    fresh = MLP()
    spora.load_param_into_net(fresh, spora.load_checkpoint(ck.latest))
    for a, b in zip(fresh.get_parameters(), net.get_parameters()):
        np.testing.assert_array_equal(np_(a), np_(b))
    assert not [f for f in os.listdir(tmp_path) if "tmp" in f]  # no temporary files left behind


def test_dataset_errors():
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1))
    x, y = blobs(64)
    with pytest.raises(TypeError, match="one-shot iterator"):
        model.train(2, iter([(x, y)]))
    with pytest.raises(TypeError, match=r"tuple \(data, label\)"):
        model.train(1, [x])
    with pytest.raises(ValueError, match="no batches"):
        model.train(1, [])
    with pytest.raises(ValueError, match="optimizer"):
        Model(net, nn.CrossEntropyLoss()).train(1, [(x, y)])


def test_plain_lists_of_numpy_batches_and_float64_data():
    x, y = blobs(96)
    batches = [(x[i:i + 32].astype(np.float64), y[i:i + 32]) for i in range(0, 96, 32)]
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), nn.Adam(net.trainable_params(), 0.02), metrics={"accuracy"})
    hist = model.train(5, batches)
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert net.fc1.weight.dtype == spora.float32
