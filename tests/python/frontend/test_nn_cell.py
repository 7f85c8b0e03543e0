"""nn.Cell: registration, names, phases, containers, repr, graph-mode calls, errors."""
import numpy as np
import pytest

import spora
from spora import nn
from nn_testutil import np_


@pytest.fixture(autouse=True)
def _pynative():
    spora.set_context(mode=spora.PYNATIVE_MODE)
    yield
    spora.set_context(mode=spora.PYNATIVE_MODE)


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, has_bias=True)
        self.bn = nn.BatchNorm2d(2)
        self.scale = spora.Parameter(spora.Tensor(np.ones((1,), np.float32)))

    def construct(self, x):
        return self.bn(self.conv(x)) * self.scale


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.SequentialCell(nn.Flatten(), nn.Dense(2 * 4 * 4, 3))
        self.extra = nn.CellList([nn.ReLU(), nn.Dense(3, 3)])

    def construct(self, x):
        y = self.head(self.block(x))
        for c in self.extra:
            y = c(y)
        return y


def test_parameters_are_named_by_path():
    net = Net()
    names = [n for n, _ in net.parameters_and_names()]
    # a cell's own parameters come before its children's (MindSpore's and PyTorch's order)
    assert names == ["block.scale", "block.conv.weight", "block.conv.bias", "block.bn.gamma", "block.bn.beta",
                     "block.bn.moving_mean", "block.bn.moving_variance",
                     "head.1.weight", "head.1.bias", "extra.1.weight", "extra.1.bias"]
    assert [p.name for p in net.get_parameters()] == names
    assert [p.name for p in net.trainable_params()] == [n for n in names if "moving" not in n]
    assert list(net.parameters_dict()) == names
    assert [n for n, _ in net.cells_and_names()][:4] == ["", "block", "block.conv", "block.bn"]
    assert list(net.name_cells()) == ["block", "head", "extra"]


def test_explicit_names_and_shared_parameters():
    shared = spora.Parameter(spora.Tensor(np.zeros(2, np.float32)), name="tied")

    class Tied(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = shared
            self.b = shared

        def construct(self, x):
            return x + self.a + self.b
    t = Tied()
    assert [n for n, _ in t.parameters_and_names()] == ["tied"]


def test_insert_param_to_cell_and_reassignment_rules():
    c = nn.Cell()
    c.insert_param_to_cell("w", spora.Parameter(spora.Tensor(np.ones(2, np.float32))))
    assert [n for n, _ in c.parameters_and_names()] == ["w"]
    with pytest.raises(TypeError, match=r"\[Cell\] Cell.w is a Parameter"):
        c.w = 3
    c.w = None
    assert list(c.parameters_and_names()) == []
    with pytest.raises(ValueError):
        c.insert_param_to_cell("a.b", spora.Parameter(spora.Tensor(np.ones(1, np.float32))))

    class NoInit(nn.Cell):
        def __init__(self):
            self.w = spora.Parameter(spora.Tensor(np.ones(1, np.float32)))
    with pytest.raises(RuntimeError, match="super\\(\\).__init__"):
        NoInit()


def test_set_train_reaches_every_cell():
    net = Net()
    assert not any(c.training for _, c in net.cells_and_names())
    net.set_train()
    assert all(c.training for _, c in net.cells_and_names())
    net.set_train(False)
    assert not net.block.bn.training


def test_sequential_and_celllist_containers():
    s = nn.SequentialCell([nn.Dense(2, 3), nn.ReLU()])
    s.append(nn.Dense(3, 1))
    assert len(s) == 3 and isinstance(s[2], nn.Dense) and isinstance(s[-1], nn.Dense)
    x = np.ones((4, 2), np.float32)
    ref = np.maximum(x @ np_(s[0].weight).T + np_(s[0].bias), 0) @ np_(s[2].weight).T + np_(s[2].bias)
    np.testing.assert_allclose(np_(s(spora.Tensor(x))), ref, rtol=1e-5)
    from collections import OrderedDict
    named = nn.SequentialCell(OrderedDict([("fc", nn.Dense(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.parameters_and_names()] == ["fc.weight", "fc.bias"]
    with pytest.raises(TypeError):
        nn.SequentialCell([nn.ReLU(), 3])
    cl = nn.CellList([nn.ReLU()])
    cl.append(nn.Dense(1, 1))
    assert len(cl) == 2 and [n for n, _ in cl.parameters_and_names()] == ["1.weight", "1.bias"]


def test_repr_is_a_tree():
    text = repr(Net())
    assert text.splitlines()[0] == "Net ("
    assert "(block): Block (" in text
    assert "(conv): Conv2d<input_channels=1, output_channels=2" in text
    assert "(1): Dense<input_channels=32, output_channels=3, has_bias=True>" in text


def test_graph_mode_call_equals_pynative_and_caches_by_signature():
    net = Net().set_train(False)
    x = spora.Tensor(np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32))
    eager = np_(net(x))
    spora.set_context(mode=spora.GRAPH_MODE)
    g1 = np_(net(x))
    np.testing.assert_allclose(g1, eager, rtol=1e-5, atol=1e-6)
    fn = next(iter(net._graph_fns.values()))
    assert fn.stats["traces"] == 1
    net(x)
    assert fn.stats["traces"] == 1 and fn.stats["hits"] >= 1
    net(spora.Tensor(np.zeros((3, 1, 4, 4), np.float32)))
    assert fn.stats["traces"] == 2  # a new batch size compiles again


def test_graph_mode_batchnorm_updates_moving_stats_like_pynative():
    x = np.random.default_rng(1).standard_normal((4, 2, 3, 3)).astype(np.float32)
    stats = []
    for mode in (spora.PYNATIVE_MODE, spora.GRAPH_MODE):
        spora.set_context(mode=mode)
        bn = nn.BatchNorm2d(2).set_train(True)
        for _ in range(3):
            y = bn(spora.Tensor(x))
        stats.append((np_(bn.moving_mean), np_(bn.moving_variance), np_(y)))
    for a, b in zip(*stats):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_wrong_input_shape_names_layer_and_line(mode):
    spora.set_context(mode=spora.GRAPH_MODE if mode == "graph" else spora.PYNATIVE_MODE)
    net = nn.SequentialCell(nn.Dense(4, 2))
    with pytest.raises(ValueError, match=r"\[Dense\] expects input with last dimension 4 \(in_channels\), "
                                         r"got shape \(3, 5\).*test_nn_cell.py:\d+"):
        net(spora.Tensor(np.zeros((3, 5), np.float32)))
