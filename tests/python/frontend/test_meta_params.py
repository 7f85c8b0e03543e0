"""Parameters declared without data (spora.nn.utils.no_init_parameters,
Tensor(shape=, dtype=, init=)): they hold shape and dtype only, using their
data is an error naming them, and init_data / init_parameters_data draw the
values eager construction draws from the same seed."""
import copy

import numpy as np
import pytest

import spora
from spora import nn


class Net(nn.Cell):
    """Every kind of initializer the layers use (normal, he/xavier uniform,
    uniform, ones, zeros), and a parameter whose initializer is replaced
    after declaration (as MultiheadAttention does with out_proj.bias)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.attn_in = spora.Parameter(nn.init.initializer(nn.init.XavierUniform(), (48, 16)))
        self.fc = nn.Dense(16, 16, activation="relu")
        self.fc.bias.set_data(nn.init.initializer("zeros", (16,)))
        self.norm = nn.LayerNorm((16,))
        self.head = nn.Dense(16, 50)

    def construct(self, ids):
        h = self.emb(ids)
        h = h + spora.ops.matmul(h, self.attn_in.T)[..., :16]
        return self.head(self.norm(self.fc(h)))


def declared(seed=5):
    nn.init.set_seed(seed)
    with nn.utils.no_init_parameters():
        net = Net()
    net.get_parameters()  # names them
    return net


def test_declared_tensor_has_shape_and_dtype_but_no_data():
    t = spora.Tensor(shape=(3, 4), dtype=spora.float16, init="ones")
    assert t.shape == (3, 4) and t.dtype == spora.float16 and t.has_init
    assert spora._C._tensor_bytes(t) == 0
    assert repr(t) == "Tensor(shape=[3, 4], dtype=float16, init='ones')"
    with pytest.raises(RuntimeError, match=r"asnumpy\(\) needs the data of a Tensor \(shape \(3, 4\), float16\).*"
                                           r"t = t.init_data\(\)"):
        t.asnumpy()
    with pytest.raises(RuntimeError, match=r"op 'add' needs the data of a Tensor"):
        t + 1
    v = t.init_data()
    assert v is not t and not v.has_init and t.has_init
    np.testing.assert_array_equal(v.asnumpy(), np.ones((3, 4), np.float16))


def test_declared_tensor_init_data_draws_the_initializer():
    nn.init.set_seed(11)
    want = nn.init.initializer(nn.init.Normal(0.5), (5, 7)).asnumpy()
    nn.init.set_seed(11)
    t = spora.Tensor(shape=(5, 7), dtype=spora.float32, init=nn.init.Normal(0.5))
    np.testing.assert_array_equal(t.init_data().asnumpy(), want)


def test_declared_tensor_argument_errors():
    spec = spora.Tensor(shape=(2,), dtype=spora.int32)  # a shape spec: no initializer
    assert not spec.has_init and spec._meta
    with pytest.raises(ValueError, match="declared without an initializer"):
        spec.init_data()
    with pytest.raises(TypeError, match="not both"):
        spora.Tensor(np.zeros(2), shape=(2,))
    with pytest.raises(TypeError, match="needs data"):
        spora.Tensor()
    with pytest.raises(ValueError, match="negative dimension"):
        spora.Tensor(shape=(2, -1), dtype=spora.float32, init="zeros")
    with pytest.raises(ValueError, match="on no device"):
        spora.Tensor(shape=(2,), dtype=spora.float32, init="zeros", device="cpu")


def test_no_init_parameters_declares_every_layer_parameter():
    net = declared()
    params = net.get_parameters()
    assert len(params) == 8
    for p in params:
        assert p.has_init, p.name
        assert spora._C._tensor_bytes(p) == 0, p.name
    assert net.head.weight.shape == (50, 16)
    assert "requires_grad=True" in repr(net.head.weight)
    with nn.utils.no_init_parameters():
        block = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    assert all(p.has_init for p in block.get_parameters())
    # Outside the context layers allocate as before.
    assert not nn.Dense(3, 4).weight.has_init


def test_using_a_declared_parameter_names_it_and_what_to_call():
    net = declared()
    with pytest.raises(RuntimeError, match=r"asnumpy\(\) needs the data of Parameter 'head.weight' \(shape \(50, "
                                           r"16\), float32\).*net.init_parameters_data\(\).*param.init_data\(\)"):
        net.head.weight.asnumpy()
    ids = spora.Tensor(np.zeros((2, 3), np.int32))
    with pytest.raises(RuntimeError, match=r"op 'embedding' needs the data of Parameter 'emb.embedding_table'"):
        net(ids)  # PyNative: an eager op
    spora.set_context(mode=spora.GRAPH_MODE)
    with pytest.raises(RuntimeError, match=r"running a graph needs the data of Parameter 'emb.embedding_table'"):
        net(ids)  # compiled: tracing works, running needs the data


def test_init_parameters_data_equals_eager_construction_from_the_same_seed():
    nn.init.set_seed(5)
    eager = Net()
    net = declared(5)
    drawn = net.init_parameters_data()
    assert len(drawn) == len(net.get_parameters())
    for (name, a), (_, b) in zip(eager.parameters_and_names(), net.parameters_and_names()):
        assert not b.has_init
        np.testing.assert_array_equal(b.asnumpy(), a.asnumpy(), err_msg=name)
    ids = spora.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    np.testing.assert_array_equal(net(ids).asnumpy(), eager(ids).asnumpy())


class WithDropout(nn.Cell):
    """Dropout draws a seed at construction, between the Parameters' draws."""

    def __init__(self):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.25, batch_first=True)
        self.head = nn.Dense(16, 5)

    def construct(self, x):
        return self.head(self.block(x))


def test_dropout_seeds_are_drawn_in_declaration_order_too():
    nn.init.set_seed(4)
    eager = WithDropout()
    nn.init.set_seed(4)
    with nn.utils.no_init_parameters():
        net = WithDropout()
    x = spora.Tensor(np.ones((2, 3, 16), np.float32))
    net.set_train(True)
    with pytest.raises(RuntimeError, match=r"\[Dropout\] declared under spora.nn.utils.no_init_parameters: its seed "
                                           r"is drawn by net.init_parameters_data\(\)"):
        net.block.dropout(x)
    net.init_parameters_data()
    assert net.block.dropout.seed == eager.block.dropout.seed
    for (name, a), (_, b) in zip(eager.parameters_and_names(), net.parameters_and_names()):
        np.testing.assert_array_equal(b.asnumpy(), a.asnumpy(), err_msg=name)
    eager.set_train(True)
    np.testing.assert_array_equal(net(x).asnumpy(), eager(x).asnumpy())


def test_a_declared_padded_embedding_gets_its_zero_row_when_drawn():
    nn.init.set_seed(8)
    eager = nn.Embedding(10, 4, padding_idx=-1)
    nn.init.set_seed(8)
    with nn.utils.no_init_parameters():
        emb = nn.Embedding(10, 4, padding_idx=-1)
    assert emb.embedding_table.has_init
    emb.init_parameters_data()
    np.testing.assert_array_equal(emb.embedding_table.asnumpy(), eager.embedding_table.asnumpy())
    assert not emb.embedding_table.asnumpy()[9].any()


def test_init_data_one_by_one_in_declaration_order_equals_eager():
    nn.init.set_seed(2)
    a, b = nn.Dense(4, 3), nn.Dense(3, 2)
    nn.init.set_seed(2)
    with nn.utils.no_init_parameters():
        c, d = nn.Dense(4, 3), nn.Dense(3, 2)
    assert c.weight.init_data() is c.weight
    for p in (c.bias, d.weight, d.bias):
        p.init_data()
    for x, y in ((a, c), (b, d)):
        np.testing.assert_array_equal(y.weight.asnumpy(), x.weight.asnumpy())
        np.testing.assert_array_equal(y.bias.asnumpy(), x.bias.asnumpy())


def test_set_data_gives_a_declared_parameter_its_data():
    net = declared()
    w = np.full((50, 16), 0.25, np.float32)
    net.head.weight.set_data(spora.Tensor(w))
    assert not net.head.weight.has_init
    np.testing.assert_array_equal(net.head.weight.asnumpy(), w)
    net.init_parameters_data()  # the others; head.weight keeps its value
    np.testing.assert_array_equal(net.head.weight.asnumpy(), w)


def test_optimizer_state_of_declared_parameters_is_declared_too():
    net = declared()
    opt = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    states = [p for p in opt.get_parameters() if p.name.startswith(("adam_m.", "adam_v."))]
    assert len(states) == 2 * len(net.trainable_params())
    assert all(p.has_init for p in states)
    opt.init_parameters_data()
    assert all(not p.has_init and not p.asnumpy().any() for p in states)


def test_deepcopy_of_a_declared_parameter_stays_declared():
    net = declared()
    p = copy.deepcopy(net.head.weight)
    assert p.has_init and p.shape == (50, 16) and p.name == "head.weight"
    assert p.init_data().asnumpy().shape == (50, 16)


def test_a_parameter_without_initializer_cannot_be_initialised():
    p = spora.Parameter(spora.Tensor(shape=(2, 2), dtype=spora.float32), name="w")
    cell = nn.Cell()
    cell.w = p
    with pytest.raises(ValueError, match=r"\['w'\] were declared without an initializer"):
        cell.init_parameters_data()
    with pytest.raises(ValueError, match="'w' was declared without an initializer"):
        p.init_data()


def test_a_checkpoint_loads_into_a_declared_network(tmp_path):
    # MindSpore's use of no_init_parameters: declare, then load the values.
    nn.init.set_seed(9)
    trained = Net()
    path = str(tmp_path / "net.ckpt")
    spora.save_checkpoint(trained, path)
    net = declared()
    spora.load_checkpoint(path, net=net)
    for (name, a), (_, b) in zip(trained.parameters_and_names(), net.parameters_and_names()):
        assert not b.has_init, name
        np.testing.assert_array_equal(b.asnumpy(), a.asnumpy(), err_msg=name)
    with pytest.raises(RuntimeError, match=r"save_checkpoint needs the data of Parameter 'attn_in'"):
        spora.save_checkpoint(declared(), str(tmp_path / "empty.ckpt"))
