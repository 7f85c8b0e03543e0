"""MindSpore-style programs, written the way a MindSpore user writes them
(`import spora as ms`), checked against NumPy: one test (or more) per row
that docs/mindspore-compat.md marks supported, outside the dataset rows
(tests/python/frontend/test_dataset_*.py cover those)."""
import numpy as np
import pytest

import spora as ms
from spora import nn, ops


@pytest.fixture(autouse=True)
def _syntax_level():
    yield
    ms.set_context(jit_syntax_level=ms.LAX)


def _log_softmax(x):
    z = x - x.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


# -- context and seeds -------------------------------------------------------------


def test_jit_syntax_level_is_accepted_and_read_back():
    ms.set_context(mode=ms.GRAPH_MODE, jit_syntax_level=ms.STRICT)
    assert ms.get_context("jit_syntax_level") == ms.STRICT
    ms.set_context(jit_syntax_level="compatible")
    assert ms.get_context("jit_syntax_level") == ms.COMPATIBLE
    with pytest.raises(ValueError, match="jit_syntax_level must be spora.STRICT"):
        ms.set_context(jit_syntax_level=7)
    # The level changes nothing: the same net gives the same result at each.
    net = nn.Dense(3, 2)
    x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    outs = []
    for level in (ms.STRICT, ms.LAX):
        ms.set_context(jit_syntax_level=level)
        outs.append(net(x).asnumpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    want = x.asnumpy() @ net.weight.asnumpy().T + net.bias.asnumpy()
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-6)


def _random_run(seed):
    ms.set_seed(seed)
    dense = nn.Dense(4, 3)
    drop = nn.Dropout(p=0.5)
    drop.set_train(True)
    x = ms.Tensor(np.ones((8, 4), np.float32))
    dropped = drop(x).asnumpy()
    u = ops.uniform((6,)).asnumpy()
    npr = np.random.rand(3)
    data = ms.dataset.NumpySlicesDataset(np.arange(12, dtype=np.int32), shuffle=True)
    order = [int(np.asarray(row[0])) for row in data.create_tuple_iterator()]
    return dense.weight.asnumpy(), dropped, u, npr, order


def test_set_seed_repeats_initializers_dropout_ops_numpy_and_dataset_shuffles():
    a, b, c = _random_run(11), _random_run(11), _random_run(12)
    for first, again in zip(a, b):
        np.testing.assert_array_equal(np.asarray(first), np.asarray(again))
    for first, other in zip(a, c):
        assert not np.array_equal(np.asarray(first), np.asarray(other))
    dropped = a[1]
    assert (dropped == 0).any() and (dropped == 2).any()  # training-mode dropout, scaled by 1/(1-p)
    assert sorted(a[4]) == list(range(12)) and a[4] != list(range(12))
    assert ms.get_seed() == 12
    with pytest.raises(ValueError, match=r"\[set_seed\]"):
        ms.set_seed(-1)


# -- tensor attributes -----------------------------------------------------------


def test_tensor_size_attributes_match_numpy():
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.float16):
        a = np.zeros((2, 3, 5), dtype)
        t = ms.Tensor(a)
        assert (t.itemsize, t.nbytes, t.strides) == (a.itemsize, a.nbytes, a.strides)
        assert (t.ndim, t.size, t.shape) == (a.ndim, a.size, a.shape)
    x = ms.Tensor(np.array([[1, 2], [3, 4]]), ms.int32)
    assert (x.itemsize, x.nbytes, x.strides) == (4, 16, (8, 4))
    s = ms.Tensor(2.5)
    assert (s.strides, s.nbytes) == ((), 4)


def test_format_spec_formats_a_one_element_tensor():
    loss = ms.Tensor(np.float32(0.123456))
    assert f"loss: {loss:>7f}" == f"loss: {np.float32(0.123456):>7f}" and f"{loss:.2f}" == "0.12"
    assert f"{ms.Tensor([7]):>3d}" == "  7"
    assert f"{loss}" == str(loss)
    with pytest.raises(TypeError, match="needs a tensor with one element"):
        f"{ms.Tensor([1.0, 2.0]):.2f}"


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ms.Tensor.from_numpy(a)
    a[1, 2] = 40.0
    np.testing.assert_array_equal(t.asnumpy(), a)
    np.testing.assert_array_equal((t * 2).asnumpy(), a * 2)
    with pytest.raises(ValueError, match="not C-contiguous"):
        ms.Tensor.from_numpy(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        ms.Tensor.from_numpy([1.0, 2.0])


# -- losses ----------------------------------------------------------------------


def test_softmax_cross_entropy_with_logits():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = np.array([4, 0, 2, 2, 1, 3])
    want = -_log_softmax(x.astype(np.float64))[np.arange(6), y]
    logits = ms.Tensor(x)
    sparse = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    np.testing.assert_allclose(sparse(logits, ms.Tensor(y.astype(np.int32))).asnumpy(), want, rtol=1e-5)
    mean = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    np.testing.assert_allclose(mean(logits, ms.Tensor(y)).asnumpy(), want.mean(), rtol=1e-5)
    onehot = np.eye(5, dtype=np.float32)[y]
    dense = nn.SoftmaxCrossEntropyWithLogits()  # sparse=False, reduction='none'
    np.testing.assert_allclose(dense(logits, ms.Tensor(onehot)).asnumpy(), want, rtol=1e-5)
    soft = rng.dirichlet(np.ones(5), size=6).astype(np.float32)
    summed = nn.SoftmaxCrossEntropyWithLogits(reduction="sum")(logits, ms.Tensor(soft)).asnumpy()
    np.testing.assert_allclose(summed, -(soft * _log_softmax(x.astype(np.float64))).sum(), rtol=1e-5)
    with pytest.raises(TypeError, match="sparse=True takes class indices"):
        sparse(logits, ms.Tensor(onehot))


# -- initializers ----------------------------------------------------------------


def test_common_initializer_paths_and_declared_tensors():
    from spora.common.initializer import Normal, One, Zero, initializer
    import spora.common.dtype as mstype
    ones = ms.Tensor(shape=(2, 3), dtype=mstype.float32, init=One())
    assert ones.has_init and ones.shape == (2, 3) and ones.nbytes == 24
    np.testing.assert_array_equal(ones.init_data().asnumpy(), np.ones((2, 3), np.float32))
    zeros = ms.Tensor(shape=(4,), dtype=mstype.int32, init=Zero()).init_data()
    assert zeros.dtype == ms.int32 and not zeros.asnumpy().any()
    ms.set_seed(5)
    drawn = ms.Tensor(shape=(300, 200), dtype=ms.float32, init=Normal(sigma=0.5, mean=1.0)).init_data().asnumpy()
    assert abs(drawn.mean() - 1.0) < 0.01 and abs(drawn.std() - 0.5) < 0.01
    ms.set_seed(5)
    again = initializer(Normal(sigma=0.5, mean=1.0), (300, 200), ms.float32).asnumpy()
    np.testing.assert_array_equal(drawn, again)
    w = ms.Parameter(initializer("xavier_uniform", (64, 32)), name="w")
    bound = np.sqrt(6.0 / (64 + 32))
    assert np.abs(w.asnumpy()).max() <= bound and np.abs(w.asnumpy()).max() > 0.9 * bound
    assert ms.common.initializer.HeUniform is nn.init.HeUniform


def test_mindspore_initializers_have_their_defining_property():
    from spora.common.initializer import Dirac, Identity, Orthogonal, Sparse, VarianceScaling, initializer
    np.testing.assert_array_equal(initializer(Identity(), (3, 4)).asnumpy(), np.eye(3, 4, dtype=np.float32))
    q = initializer(Orthogonal(gain=2.0), (4, 3, 3), ms.float64).asnumpy().reshape(4, 9)
    np.testing.assert_allclose(q @ q.T, 4.0 * np.eye(4), atol=1e-12)
    v = initializer(VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform"), (300, 500)).asnumpy()
    assert abs(v.var() - 2.0 / 500) < 2e-4 and np.abs(v).max() <= np.sqrt(3 * 2.0 / 500)
    t = initializer(VarianceScaling(scale=2.0), (300, 500)).asnumpy()  # truncated at 2 sd, variance kept
    assert abs(t.var() - 2.0 / 500) < 2e-4
    s = initializer(Sparse(0.25, sigma=1.0), (8, 5)).asnumpy()
    np.testing.assert_array_equal((s == 0).sum(axis=0), [2] * 5)
    d = initializer(Dirac(groups=2), (4, 2, 3, 3)).asnumpy()
    np.testing.assert_array_equal(d[:, :, 1, 1], [[1, 0], [0, 1], [1, 0], [0, 1]])
    assert d.sum() == 4
    x = np.random.default_rng(0).standard_normal((1, 4, 5, 5)).astype(np.float32)
    conv = nn.Conv2d(4, 4, 3, pad_mode="same", weight_init=Dirac(), has_bias=False)
    np.testing.assert_allclose(conv(ms.Tensor(x)).asnumpy(), x, atol=1e-6)


def test_custom_initializer_fills_its_array_in_place():
    from spora.common.initializer import Initializer, initializer

    class Ramp(Initializer):
        def __init__(self, step):
            super().__init__()
            self.step = step

        def _initialize(self, arr):
            arr[...] = np.arange(arr.size).reshape(arr.shape) * self.step

    got = initializer(Ramp(0.5), (2, 3), ms.float32).asnumpy()
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
    np.testing.assert_array_equal(ms.Tensor(shape=(3,), dtype=ms.int32, init=Ramp(2)).init_data().asnumpy(),
                                  [0, 2, 4])


# -- save and load ---------------------------------------------------------------


def _mlp():
    return nn.SequentialCell(nn.Flatten(), nn.Dense(12, 16), nn.ReLU(), nn.Dense(16, 3))


def test_checkpoint_round_trip_into_a_fresh_network(tmp_path):
    trained = _mlp()
    ckpt = str(tmp_path / "mlp.ckpt")
    ms.save_checkpoint(trained, ckpt)
    fresh = _mlp()
    params = ms.load_checkpoint(ckpt)
    assert sorted(params) == sorted(name for name, _ in trained.parameters_and_names())
    not_loaded, unused = ms.load_param_into_net(fresh, params)
    assert not_loaded == [] and unused == []
    x = ms.Tensor(np.random.default_rng(1).standard_normal((4, 3, 4)).astype(np.float32))
    np.testing.assert_array_equal(fresh(x).asnumpy(), trained(x).asnumpy())


def test_export_mindir_then_load_into_graph_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ms.set_context(mode=ms.GRAPH_MODE, jit_syntax_level=ms.STRICT)
    net = _mlp()
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    ms.export(net, ms.Tensor(x), file_name="mlp", file_format="MINDIR")
    assert (tmp_path / "mlp.mindir").exists()
    graph = ms.load("mlp.mindir")
    cell = nn.GraphCell(graph)
    h = np.maximum(x.reshape(2, 12) @ net[1].weight.asnumpy().T + net[1].bias.asnumpy(), 0)
    want = h @ net[3].weight.asnumpy().T + net[3].bias.asnumpy()
    np.testing.assert_allclose(cell(ms.Tensor(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.GraphCell("mlp.mindir")(ms.Tensor(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    (tmp_path / "from_mindspore.mindir").write_bytes(b"\x0a\x0bmindspore" + bytes(64))  # protobuf, not Spora's
    with pytest.raises(ValueError, match="a MindIR file written by MindSpore cannot be read by Spora"):
        ms.load("from_mindspore.mindir")
    with pytest.raises(ValueError, match="file_format 'AIR' is not supported"):
        ms.export(net, ms.Tensor(x), file_name="mlp", file_format="AIR")


# -- sparse tensors --------------------------------------------------------------


def _random_sparse(rng, m, n, density):
    dense = rng.standard_normal((m, n)).astype(np.float32)
    dense[rng.random((m, n)) >= density] = 0
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int32)
    return dense, indptr, cols.astype(np.int32), dense[rows, cols]


def test_csr_tensor_parts_conversions_and_elementwise_ops():
    rng = np.random.default_rng(7)
    dense, indptr, cols, vals = _random_sparse(rng, 6, 9, 0.3)
    csr = ms.CSRTensor(ms.Tensor(indptr), ms.Tensor(cols), ms.Tensor(vals), (6, 9))
    assert csr.shape == (6, 9) and csr.dtype == ms.float32 and csr.size == vals.size and csr.ndim == 2
    np.testing.assert_array_equal(csr.indptr.asnumpy(), indptr)
    np.testing.assert_array_equal(csr.indices.asnumpy(), cols)
    np.testing.assert_array_equal(csr.values.asnumpy(), vals)
    np.testing.assert_array_equal(csr.to_dense().asnumpy(), dense)
    assert csr.astype(ms.float64).dtype == ms.float64
    np.testing.assert_array_equal(csr.astype(ms.float64).to_dense().asnumpy(), dense.astype(np.float64))
    coo = csr.to_coo()
    np.testing.assert_array_equal(coo.indices.asnumpy(), np.argwhere(dense != 0))
    np.testing.assert_array_equal(coo.to_dense().asnumpy(), dense)
    back = coo.to_csr()
    np.testing.assert_array_equal(back.indptr.asnumpy(), indptr)
    np.testing.assert_array_equal(back.indices.asnumpy(), cols)
    scale = rng.standard_normal((6, 9)).astype(np.float32)
    np.testing.assert_allclose((csr * ms.Tensor(scale)).to_dense().asnumpy(), dense * scale, rtol=1e-6)
    np.testing.assert_allclose((ms.Tensor(scale) * csr).to_dense().asnumpy(), dense * scale, rtol=1e-6)
    row = rng.uniform(1, 2, (1, 9)).astype(np.float32)  # broadcast like the dense op
    np.testing.assert_allclose((csr / ms.Tensor(row)).to_dense().asnumpy(), dense / row, rtol=1e-6)
    np.testing.assert_array_equal((-csr).abs().to_dense().asnumpy(), np.abs(dense))
    np.testing.assert_array_equal((csr * 3).to_dense().asnumpy(), dense * 3)
    np.testing.assert_allclose(csr.sum(1).asnumpy(), dense.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(csr.sum(0).asnumpy(), dense.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)
    other_dense, p2, c2, v2 = _random_sparse(rng, 6, 9, 0.3)
    other = ms.CSRTensor(ms.Tensor(p2), ms.Tensor(c2), ms.Tensor(v2), (6, 9))
    total = csr + other
    np.testing.assert_allclose(total.to_dense().asnumpy(), dense + other_dense, rtol=1e-6)
    assert total.size == np.count_nonzero((dense != 0) | (other_dense != 0))
    np.testing.assert_allclose((csr - other).to_dense().asnumpy(), dense - other_dense, rtol=1e-6)
    np.testing.assert_allclose(csr.add(other, 2.0, -0.5).to_dense().asnumpy(), 2 * dense - 0.5 * other_dense,
                               rtol=1e-6)


def test_csr_matrix_products_and_their_gradients():
    rng = np.random.default_rng(8)
    dense, indptr, cols, vals = _random_sparse(rng, 7, 5, 0.4)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    csr = ms.CSRTensor(ms.Tensor(indptr), ms.Tensor(cols), ms.Tensor(vals), (7, 5))
    np.testing.assert_allclose(ops.csr_mm(csr, ms.Tensor(b)).asnumpy(), dense @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(csr.mm(ms.Tensor(b)).asnumpy(), dense @ b, rtol=1e-5, atol=1e-6)
    v = rng.standard_normal(5).astype(np.float32)
    np.testing.assert_allclose(csr.mv(ms.Tensor(v.reshape(5, 1))).asnumpy(), (dense @ v).reshape(7, 1), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(csr.mv(ms.Tensor(v)).asnumpy(), dense @ v, rtol=1e-5, atol=1e-6)
    # sparse x sparse keeps the structural product's positions
    bd, bp, bc, bv = _random_sparse(rng, 5, 4, 0.4)
    prod = ops.csr_mm(csr, ms.CSRTensor(ms.Tensor(bp), ms.Tensor(bc), ms.Tensor(bv), (5, 4)))
    assert isinstance(prod, ms.CSRTensor) and prod.shape == (7, 4)
    np.testing.assert_allclose(prod.to_dense().asnumpy(), dense @ bd, rtol=1e-5, atol=1e-6)
    assert prod.size == np.count_nonzero((dense != 0).astype(int) @ (bd != 0).astype(int))

    # d/dvalues and d/db of sum(csr @ b * w)
    w = rng.standard_normal((7, 3)).astype(np.float32)

    def loss(values, rhs):
        a = ms.CSRTensor(csr.indptr, csr.indices, values, (7, 5))
        return (a.mm(rhs) * ms.Tensor(w)).sum()

    g_values, g_b = ms.grad(loss, grad_position=(0, 1))(ms.Tensor(vals), ms.Tensor(b))
    rows = np.repeat(np.arange(7), np.diff(indptr))
    np.testing.assert_allclose(g_values.asnumpy(), (w @ b.T)[rows, cols], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_b.asnumpy(), dense.T @ w, rtol=1e-5, atol=1e-6)


def test_coo_tensor_duplicates_add_up_and_mixed_sums():
    idx = np.array([[0, 1], [2, 3], [0, 1], [1, 0]], np.int64)
    vals = np.array([1.5, -2.0, 0.5, 4.0], np.float32)
    coo = ms.COOTensor(ms.Tensor(idx), ms.Tensor(vals), (3, 4))
    want = np.zeros((3, 4), np.float32)
    np.add.at(want, (idx[:, 0], idx[:, 1]), vals)
    np.testing.assert_array_equal(coo.to_dense().asnumpy(), want)
    merged = coo.coalesce()
    np.testing.assert_array_equal(merged.indices.asnumpy(), [[0, 1], [1, 0], [2, 3]])
    np.testing.assert_array_equal(merged.values.asnumpy(), [2.0, 4.0, -2.0])
    csr = coo.to_csr()
    np.testing.assert_array_equal(csr.indptr.asnumpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(csr.to_dense().asnumpy(), want)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal((coo + ms.Tensor(x)).asnumpy(), want + x)
    np.testing.assert_array_equal((coo * ms.Tensor(x)).to_dense().asnumpy(), want * x)
    np.testing.assert_array_equal((coo + coo).to_dense().asnumpy(), 2 * want)
    np.testing.assert_array_equal((coo - coo).to_dense().asnumpy(), np.zeros((3, 4)))
    thin = coo.add(ms.COOTensor(ms.Tensor(np.array([[2, 3]])), ms.Tensor(np.array([1.9], np.float32)), (3, 4)), 0.2)
    np.testing.assert_array_equal(thin.indices.asnumpy(), [[0, 1], [1, 0]])  # -2.0 + 1.9 is below 0.2
    cube = ms.COOTensor(ms.Tensor(np.array([[1, 0, 2], [0, 2, 1]])), ms.Tensor(np.array([3, 5], np.int32)), (2, 3, 4))
    d3 = np.zeros((2, 3, 4), np.int32)
    d3[1, 0, 2], d3[0, 2, 1] = 3, 5
    np.testing.assert_array_equal(cube.to_dense().asnumpy(), d3)
    np.testing.assert_array_equal(ops.dense_to_sparse_coo(ms.Tensor(d3)).to_dense().asnumpy(), d3)
    np.testing.assert_array_equal(ms.Tensor(want).to_csr().to_dense().asnumpy(), want)


def test_sparse_constructors_refuse_inconsistent_parts():
    t = ms.Tensor
    with pytest.raises(ValueError, match="indptr has 2 entries; a matrix of 2 rows needs 3"):
        ms.CSRTensor(t([0, 1]), t([0]), t([1.0]), (2, 3))
    with pytest.raises(ValueError, match="never decrease"):
        ms.CSRTensor(t([0, 2, 1]), t([0]), t([1.0]), (2, 3))
    with pytest.raises(ValueError, match=r"column indices must be in \[0, 3\)"):
        ms.CSRTensor(t([0, 1, 1]), t([3]), t([1.0]), (2, 3))
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        ms.CSRTensor(t([0, 1, 1]), t([1.0]), t([1.0]), (2, 3))
    with pytest.raises(ValueError, match=r"index row 1 \[2, 0\] is outside shape \(2, 3\)"):
        ms.COOTensor(t([[0, 0], [2, 0]]), t([1.0, 2.0]), (2, 3))
    with pytest.raises(ValueError, match="trans_a, trans_b"):
        ops.csr_mm(ms.CSRTensor(t([0, 1, 1]), t([0]), t([1.0]), (2, 3)), t(np.ones((3, 1), np.float32)),
                   trans_a=True)


# -- training wrappers and parallel settings ---------------------------------------


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
@pytest.mark.parametrize("sens", [None, 4.0])
def test_train_one_step_cell_is_sgd_on_the_loss(mode, sens):
    ms.set_context(mode=mode)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 3)).astype(np.float32)
    y = rng.standard_normal((16, 2)).astype(np.float32)
    net = nn.Dense(3, 2)
    w, b = net.weight.asnumpy().astype(np.float64), net.bias.asnumpy().astype(np.float64)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.1), sens=sens)
    for _ in range(3):
        loss = train(ms.Tensor(x), ms.Tensor(y)).asnumpy()
        pred = x @ w.T + b
        np.testing.assert_allclose(loss, ((pred - y) ** 2).mean(), rtol=1e-5)
        g = 2 * (pred - y) / pred.size * (1.0 if sens is None else sens)
        w, b = w - 0.1 * g.T @ x, b - 0.1 * g.sum(0)
    np.testing.assert_allclose(net.weight.asnumpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.bias.asnumpy(), b, rtol=1e-5, atol=1e-6)


def test_parallel_mode_names_and_communication_management_path():
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL)
    try:
        assert ms.get_auto_parallel_context("parallel_mode") == "semi_auto_parallel"
    finally:
        ms.reset_auto_parallel_context()
    assert ms.get_auto_parallel_context("parallel_mode") == ms.ParallelMode.STAND_ALONE
    from spora.communication.management import get_group_size, init
    import spora.communication as comm
    assert init is comm.init and get_group_size is comm.get_group_size


def test_model_and_callbacks_at_the_top_and_set_grad():
    assert ms.Model is ms.train.Model and ms.LossMonitor is ms.train.LossMonitor
    assert ms.CheckpointConfig is ms.train.CheckpointConfig
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        ms.NoSuchName
    net = nn.Dense(3, 1)
    assert net.set_grad() is net
    x = ms.Tensor(np.ones((2, 3), np.float32))
    _, (gw, gb) = ms.value_and_grad(lambda v: net(v).sum(), None, net.trainable_params())(x)
    np.testing.assert_array_equal(gw.asnumpy(), np.full((1, 3), 2.0, np.float32))
    np.testing.assert_array_equal(gb.asnumpy(), [2.0])


# -- tensors ---------------------------------------------------------------------


def test_tensor_construction_methods_and_indexing_match_numpy():
    assert ms.Tensor([1, 2]).dtype == ms.int64 and ms.Tensor([1.5]).dtype == ms.float32
    assert ms.Tensor(np.ones(2)).dtype == ms.float64 and ms.Tensor(2, ms.float32).dtype == ms.float32
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    x = ms.Tensor(a)
    np.testing.assert_array_equal(x.astype(ms.int32).asnumpy(), a.astype(np.int32))
    np.testing.assert_array_equal(x.reshape(6, 4).asnumpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(x.view(4, 6).asnumpy(), a.reshape(4, 6))
    np.testing.assert_array_equal(x.transpose().asnumpy(), a.transpose())
    np.testing.assert_array_equal(x.transpose(1, 0, 2).asnumpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(x.T.asnumpy(), a.T)
    np.testing.assert_array_equal(x.expand_dims(1).squeeze(1).asnumpy(), a)
    assert x.expand_dims(0).shape == (1, 2, 3, 4)
    np.testing.assert_allclose(x.sum().asnumpy(), a.sum())
    np.testing.assert_allclose(x.mean(axis=1).asnumpy(), a.mean(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(x.max(axis=2, keepdims=True).asnumpy(), a.max(axis=2, keepdims=True))
    np.testing.assert_array_equal(x.argmax(axis=1).asnumpy(), a.argmax(axis=1))
    assert x[1, 2, 3].item() == a[1, 2, 3]
    np.testing.assert_array_equal(x[0].asnumpy(), a[0])
    np.testing.assert_array_equal(x[:, -1].asnumpy(), a[:, -1])
    np.testing.assert_array_equal(x[..., -1].asnumpy(), a[..., -1])
    np.testing.assert_array_equal(x[x > 3].asnumpy(), a[a > 3])
    x[0, 1] = 100.0
    b = a.copy()
    b[0, 1] = 100.0
    np.testing.assert_array_equal(x.asnumpy(), b)
    np.testing.assert_array_equal(ops.ones_like(x).asnumpy(), np.ones_like(a))
    np.testing.assert_array_equal(ops.zeros_like(x).asnumpy(), np.zeros_like(a))
    np.testing.assert_array_equal(ops.cat((x, x)).asnumpy(), np.concatenate((b, b)))
    np.testing.assert_array_equal(ops.concat((x, x), 2).asnumpy(), np.concatenate((b, b), 2))
    np.testing.assert_array_equal(ops.stack([x, x], 1).asnumpy(), np.stack([b, b], 1))
    m = ms.Tensor(a[0])
    np.testing.assert_array_equal((m * m).asnumpy(), a[0] * a[0])
    np.testing.assert_allclose((m @ m.T).asnumpy(), a[0] @ a[0].T, rtol=1e-6)
    np.testing.assert_allclose(ops.matmul(m, m.T).asnumpy(), a[0] @ a[0].T, rtol=1e-6)
    import spora.common.dtype as mstype
    assert mstype.float32 == ms.float32 and mstype.half == ms.float16 and mstype.int64 == np.int64


# -- nn layers, losses, optimizers -----------------------------------------------------------


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, pad_mode="valid", has_bias=True)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.head = nn.SequentialCell(nn.Dense(8, 4, activation="relu"), nn.Dense(4, 3))

    def construct(self, x):
        return self.head(self.flatten(self.pool(self.conv(x))))


def _np_conv_valid(x, w, b):
    n, _, h, wd = x.shape
    o, _, k, _ = w.shape
    out = np.zeros((n, o, h - k + 1, wd - k + 1))
    for i in range(h - k + 1):
        for j in range(wd - k + 1):
            out[:, :, i, j] = np.einsum("ncab,ocab->no", x[:, :, i:i + k, j:j + k], w)
    return out + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_cell_with_construct_matches_numpy(mode):
    ms.set_context(mode=mode)
    net = _Net()
    names = [n for n, _ in net.parameters_and_names()]
    assert names == ["conv.weight", "conv.bias", "head.0.weight", "head.0.bias", "head.1.weight", "head.1.bias"]
    assert len(net.trainable_params()) == 6
    x = np.random.default_rng(9).standard_normal((2, 1, 6, 6)).astype(np.float32)
    p = {n: v.asnumpy().astype(np.float64) for n, v in net.parameters_and_names()}
    c = _np_conv_valid(x.astype(np.float64), p["conv.weight"], p["conv.bias"])
    pooled = c.reshape(2, 2, 2, 2, 2, 2).max(axis=(3, 5)).reshape(2, 8)
    h = np.maximum(pooled @ p["head.0.weight"].T + p["head.0.bias"], 0)
    want = h @ p["head.1.weight"].T + p["head.1.bias"]
    np.testing.assert_allclose(net(ms.Tensor(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)
    cells = nn.CellList([nn.Dense(3, 3), nn.ReLU()])
    assert len(cells) == 2 and isinstance(cells[1], nn.ReLU)


def test_layers_and_activations_match_numpy():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    x = ms.Tensor(a)
    np.testing.assert_allclose(nn.AvgPool2d(2, 2)(x).asnumpy(), a.reshape(2, 3, 2, 2, 2, 2).mean(axis=(3, 5)),
                               rtol=1e-5, atol=1e-6)
    bn = nn.BatchNorm2d(3)
    bn.set_train(False)  # eval: the moving statistics (0 and 1)
    np.testing.assert_allclose(bn(x).asnumpy(), a / np.sqrt(1 + 1e-5), rtol=1e-5)
    bn.set_train(True)
    mu, var = a.mean(axis=(0, 2, 3), keepdims=True), a.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(bn(x).asnumpy(), (a - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    v = a.reshape(6, 16)
    ln = nn.LayerNorm((16,))
    want = (v - v.mean(1, keepdims=True)) / np.sqrt(v.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(ms.Tensor(v)).asnumpy(), want, rtol=1e-4, atol=1e-5)
    emb = nn.Embedding(10, 4)
    np.testing.assert_array_equal(emb(ms.Tensor([3, 7])).asnumpy(), emb.embedding_table.asnumpy()[[3, 7]])
    drop = nn.Dropout(keep_prob=0.75)
    drop.set_train(False)
    np.testing.assert_array_equal(drop(x).asnumpy(), a)
    assert abs(nn.Dropout(keep_prob=0.75).p - 0.25) < 1e-12
    acts = {nn.ReLU: np.maximum(v, 0), nn.Sigmoid: 1 / (1 + np.exp(-v)), nn.Tanh: np.tanh(v),
            nn.SiLU: v / (1 + np.exp(-v)), nn.ReLU6: np.clip(v, 0, 6), nn.Softplus: np.log1p(np.exp(v)),
            nn.Softmax: np.exp(v) / np.exp(v).sum(-1, keepdims=True), nn.LogSoftmax: _log_softmax(v)}
    for cls, want in acts.items():
        np.testing.assert_allclose(cls()(ms.Tensor(v)).asnumpy(), want, rtol=1e-5, atol=1e-6, err_msg=cls.__name__)
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(ms.Tensor(v)).asnumpy(), np.where(v > 0, v, 0.1 * v), rtol=1e-6)
    attn = nn.MultiheadAttention(8, 2)
    seq = ms.Tensor(rng.standard_normal((5, 2, 8)).astype(np.float32))
    assert attn(seq, seq, seq)[0].shape == (5, 2, 8)


def test_losses_match_numpy():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = rng.standard_normal((5, 4)).astype(np.float32)
    cls = np.array([0, 3, 1, 1, 2])
    lx = _log_softmax(x.astype(np.float64))
    t = ms.Tensor
    np.testing.assert_allclose(nn.CrossEntropyLoss()(t(x), t(cls)).asnumpy(), -lx[np.arange(5), cls].mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(nn.NLLLoss()(t(lx.astype(np.float32)), t(cls)).asnumpy(),
                               -lx[np.arange(5), cls].mean(), rtol=1e-5)
    np.testing.assert_allclose(nn.MSELoss()(t(x), t(y)).asnumpy(), ((x - y) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(nn.L1Loss(reduction="sum")(t(x), t(y)).asnumpy(), np.abs(x - y).sum(), rtol=1e-5)
    p = rng.random((5, 4)).astype(np.float32)
    bce = np.maximum(x, 0) - x * p + np.log1p(np.exp(-np.abs(x)))
    np.testing.assert_allclose(nn.BCEWithLogitsLoss()(t(x), t(p)).asnumpy(), bce.mean(), rtol=1e-5)


def test_optimizers_one_step_match_numpy():
    g = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    w0 = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)

    def step(make):
        w = ms.Parameter(ms.Tensor(w0.copy()), name="w")
        opt = make([w])
        assert opt.parameters[0] is w
        for _ in range(2):
            opt((ms.Tensor(g),))
        return w.asnumpy()

    np.testing.assert_allclose(step(lambda ps: nn.SGD(ps, 0.1)), w0 - 0.2 * g, rtol=1e-6)
    # Momentum: v = m * v + g; w -= lr * v
    v1, v2 = g, 0.9 * g + g
    np.testing.assert_allclose(step(lambda ps: nn.Momentum(ps, 0.1, 0.9)), w0 - 0.1 * (v1 + v2), rtol=1e-6)
    m = v = 0.0
    w = w0.astype(np.float64)
    for i in (1, 2):
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w = w - 0.01 * (m / (1 - 0.9 ** i)) / (np.sqrt(v / (1 - 0.999 ** i)) + 1e-8)
    np.testing.assert_allclose(step(lambda ps: nn.Adam(ps, 0.01)), w, rtol=1e-5)
    lr = nn.CosineDecayLR(0.01, 0.1, 10)
    np.testing.assert_allclose(lr(ms.Tensor(np.int32(3))).asnumpy(),
                               0.01 + 0.5 * 0.09 * (1 + np.cos(np.pi * 3 / 10)), rtol=1e-6)


# -- ops, autodiff, jit ----------------------------------------------------------


def test_functional_ops_and_primitives_match_numpy():
    a = np.random.default_rng(12).standard_normal((3, 4)).astype(np.float32)
    x = ms.Tensor(a)
    np.testing.assert_allclose(ops.relu(x).asnumpy(), np.maximum(a, 0))
    np.testing.assert_allclose(ops.softmax(x, 1).asnumpy(), np.exp(_log_softmax(a)), rtol=1e-5)
    np.testing.assert_allclose(ops.sigmoid(x).asnumpy(), 1 / (1 + np.exp(-a)), rtol=1e-5)
    np.testing.assert_allclose(ops.exp(x).asnumpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(ops.mean(x).asnumpy(), a.mean(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ops.sum(x, 1).asnumpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(ops.argmax(x, 1).asnumpy(), a.argmax(1))
    np.testing.assert_array_equal(ops.reshape(x, (4, 3)).asnumpy(), a.reshape(4, 3))
    np.testing.assert_array_equal(ops.transpose(x, (1, 0)).asnumpy(), a.T)
    np.testing.assert_array_equal(ops.gather(x, ms.Tensor([2, 0]), 0).asnumpy(), a[[2, 0]])
    np.testing.assert_allclose(ops.cross_entropy(x, ms.Tensor([1, 0, 3])).asnumpy(),
                               -_log_softmax(a)[[0, 1, 2], [1, 0, 3]].mean(), rtol=1e-5)
    np.testing.assert_allclose(ops.ReLU()(x).asnumpy(), np.maximum(a, 0))
    np.testing.assert_allclose(ops.MatMul()(x, x.T).asnumpy(), a @ a.T, rtol=1e-5)
    np.testing.assert_allclose(ops.Softmax()(x).asnumpy(), np.exp(_log_softmax(a)), rtol=1e-5)
    np.testing.assert_allclose(ops.ReduceSum(keep_dims=True)(x, 1).asnumpy(), a.sum(1, keepdims=True), rtol=1e-5)
    u = ops.uniform((1000,), seed=3).asnumpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.05


def test_grad_value_and_grad_stop_gradient_and_jit():
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, -1.0, 2.0], np.float32)

    def f(x, y):
        return (x * x * y).sum()

    gx, gy = ms.grad(f, grad_position=(0, 1))(ms.Tensor(a), ms.Tensor(b))
    np.testing.assert_allclose(gx.asnumpy(), 2 * a * b)
    np.testing.assert_allclose(gy.asnumpy(), a * a)
    g_stop = ms.grad(lambda x: (x * ops.stop_gradient(x)).sum())(ms.Tensor(a))
    np.testing.assert_allclose(g_stop.asnumpy(), a)
    net = nn.Dense(3, 1)

    def forward(x):
        out = net(x)
        return (out * out).sum(), out

    xs = np.ones((2, 3), np.float32)
    (loss, out), (gw, gb) = ms.value_and_grad(forward, None, net.trainable_params(), has_aux=True)(ms.Tensor(xs))
    o = xs @ net.weight.asnumpy().T + net.bias.asnumpy()
    np.testing.assert_allclose(out.asnumpy(), o, rtol=1e-6)
    np.testing.assert_allclose(loss.asnumpy(), (o * o).sum(), rtol=1e-5)
    np.testing.assert_allclose(gw.asnumpy(), (2 * o).T @ xs, rtol=1e-5)
    np.testing.assert_allclose(gb.asnumpy(), (2 * o).sum(0), rtol=1e-5)

    @ms.jit
    def scaled(x):
        return ops.relu(x) * 2

    np.testing.assert_array_equal(scaled(ms.Tensor(b)).asnumpy(), np.maximum(b, 0) * 2)

    class Jitted(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(3, 2)

        @ms.jit
        def construct(self, x):
            return self.dense(x)

    c = Jitted()
    np.testing.assert_allclose(c(ms.Tensor(xs)).asnumpy(), xs @ c.dense.weight.asnumpy().T + c.dense.bias.asnumpy(),
                               rtol=1e-6)


# -- training ----------------------------------------------------------------------


def _regression_data():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)
    return x, y


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_functional_training_step_is_sgd(mode):
    ms.set_context(mode=mode)
    x, y = _regression_data()
    net = nn.Dense(4, 1)
    loss_fn = nn.MSELoss()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.05)

    def forward_fn(data, label):
        logits = net(data)
        return loss_fn(logits, label), logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    @ms.jit
    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        optimizer(grads)
        return loss

    w, b = net.weight.asnumpy().astype(np.float64), net.bias.asnumpy().astype(np.float64)
    for _ in range(4):
        loss = train_step(ms.Tensor(x), ms.Tensor(y)).asnumpy()
        pred = x @ w.T + b
        np.testing.assert_allclose(loss, ((pred - y) ** 2).mean(), rtol=1e-5)
        g = 2 * (pred - y) / pred.size
        w, b = w - 0.05 * g.T @ x, b - 0.05 * g.sum(0)
    np.testing.assert_allclose(net.weight.asnumpy(), w, rtol=1e-5)


def test_model_train_eval_predict_with_callbacks(tmp_path):
    from spora.train import CheckpointConfig, LossMonitor, ModelCheckpoint, TimeMonitor
    rng = np.random.default_rng(14)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + 2 * (x[:, 1] > 0).astype(np.int32)
    data = ms.dataset.NumpySlicesDataset((x, y), column_names=["x", "y"], shuffle=False).batch(16)
    net = nn.Dense(4, 4)
    model = ms.Model(net, nn.CrossEntropyLoss(), nn.Momentum(net.trainable_params(), 0.2, 0.9),
                     metrics={"accuracy"})
    before = model.eval(data)["accuracy"]
    ckpt = ModelCheckpoint(prefix="net", directory=str(tmp_path),
                           config=CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=2))
    model.train(30, data, callbacks=[LossMonitor(), TimeMonitor(), ckpt])
    after = model.eval(data)["accuracy"]
    logits = model.predict(ms.Tensor(x)).asnumpy()
    w, b = net.weight.asnumpy(), net.bias.asnumpy()
    np.testing.assert_allclose(logits, x @ w.T + b, rtol=1e-5, atol=1e-6)
    assert after == pytest.approx(((x @ w.T + b).argmax(1) == y).mean())
    assert after > max(before, 0.9)
    saved = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".ckpt")
    assert saved
    final = ms.load_checkpoint(str(tmp_path / saved[-1]))
    assert set(final) == {"weight", "bias"}


# -- context -----------------------------------------------------------------------


def test_set_context_mode_and_device_target():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU", device_id=0)
    assert ms.get_context("mode") == ms.GRAPH_MODE
    assert ms.get_context("device_target") == "cpu" and ms.get_context("device_id") == 0
    with pytest.raises(ms.BackendUnavailableError, match="no Ascend backend"):
        ms.set_context(device_target="Ascend")
    # MindSpore options that cannot change a result here are accepted ...
    ms.set_context(max_call_depth=10000, save_graphs=False, pynative_synchronize=True)
    # ... the others say what to write instead.
    with pytest.raises(TypeError, match=r"unknown option.*save_graphs: .*fn.last_graph"):
        ms.set_context(save_graphs=True)
    with pytest.raises(TypeError, match="runtime_num_threads: set SPORA_NUM_THREADS"):
        ms.set_context(runtime_num_threads=2)
    with pytest.raises(TypeError, match=r"jit_config: write set_context\(jit_level="):
        ms.set_context(jit_config={"jit_level": "O1"})
    with pytest.raises(ValueError, match="max_call_depth must be a positive int"):
        ms.set_context(max_call_depth=0)


def test_dynamic_lr_lists_and_optimizers_taking_them():
    epochs = np.arange(8) // 2  # 8 steps, 2 per epoch
    np.testing.assert_allclose(nn.cosine_decay_lr(0.01, 0.1, 8, 2, 2),
                               0.01 + 0.045 * (1 + np.cos(np.pi * np.minimum(epochs, 2) / 2)))
    np.testing.assert_allclose(nn.exponential_decay_lr(0.1, 0.5, 8, 2, 2), 0.1 * 0.5 ** (epochs / 2))
    np.testing.assert_allclose(nn.exponential_decay_lr(0.1, 0.5, 8, 2, 2, is_stair=True), 0.1 * 0.5 ** (epochs // 2))
    np.testing.assert_allclose(nn.natural_exp_decay_lr(0.1, 0.5, 8, 2, 2), 0.1 * np.exp(-0.5 * epochs / 2))
    np.testing.assert_allclose(nn.inverse_decay_lr(0.1, 0.5, 8, 2, 2), 0.1 / (1 + 0.5 * epochs / 2))
    np.testing.assert_allclose(nn.polynomial_decay_lr(0.1, 0.01, 8, 2, 2, 2.0),
                               0.09 * (1 - np.minimum(epochs, 2) / 2) ** 2 + 0.01)
    np.testing.assert_allclose(nn.warmup_lr(0.1, 8, 2, 2), 0.1 * np.minimum(epochs, 2) / 2)
    assert nn.piecewise_constant_lr([2, 5], [0.1, 0.05]) == [0.1, 0.1, 0.05, 0.05, 0.05]
    with pytest.raises(ValueError, match="min_lr < max_lr"):
        nn.cosine_decay_lr(0.1, 0.01, 8, 2, 2)
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        w = ms.Parameter(ms.Tensor(np.zeros(2, np.float32)), name="w")
        opt = nn.SGD([w], learning_rate=[0.1, 0.2, 0.4])  # the last rate stays after the list ends
        step = ms.jit(lambda g: opt((g,)))
        for _ in range(5):
            step(ms.Tensor(np.ones(2, np.float32)))
        np.testing.assert_allclose(w.asnumpy(), [-(0.1 + 0.2 + 0.4 * 3)] * 2, rtol=1e-6)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_grad_operation_and_parameter_tuple(mode):
    ms.set_context(mode=mode)
    rng = np.random.default_rng(15)
    xa = rng.standard_normal((2, 3)).astype(np.float32)
    ya = rng.standard_normal((2, 2)).astype(np.float32)
    x, y = ms.Tensor(xa), ms.Tensor(ya)
    net = nn.Dense(3, 2)
    w, b = net.weight.asnumpy(), net.bias.asnumpy()
    weights = ms.ParameterTuple(net.trainable_params())

    def weighted(a, c):  # non-scalar: differentiated as its sum
        return net(a) * c

    np.testing.assert_allclose(ops.GradOperation()(weighted)(x, y).asnumpy(), ya @ w, rtol=1e-5, atol=1e-6)
    gx, gy = ops.GradOperation(get_all=True)(weighted)(x, y)
    np.testing.assert_allclose(gy.asnumpy(), xa @ w.T + b, rtol=1e-5, atol=1e-6)
    gw, gb = ops.GradOperation(get_by_list=True)(weighted, weights)(x, y)
    np.testing.assert_allclose(gw.asnumpy(), ya.T @ xa, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb.asnumpy(), ya.sum(0), rtol=1e-5, atol=1e-6)
    inputs, params = ops.GradOperation(get_all=True, get_by_list=True)(weighted, weights)(x, y)
    assert len(inputs) == 2 and len(params) == 2
    np.testing.assert_allclose(params[0].asnumpy(), ya.T @ xa, rtol=1e-5, atol=1e-6)
    sens = rng.standard_normal((2, 2)).astype(np.float32)
    np.testing.assert_allclose(ops.GradOperation(sens_param=True)(net)(x, ms.Tensor(sens)).asnumpy(), sens @ w,
                               rtol=1e-5, atol=1e-6)
    assert ops.depend(x, y) is x
    with pytest.raises(ValueError, match="get_by_list=True needs weights"):
        ops.GradOperation(get_by_list=True)(weighted)
    with pytest.raises(TypeError, match="not a Parameter"):
        ms.ParameterTuple([x])


# -- recurrent layers ----------------------------------------------------------------


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _np_step(mode, x, h, w_ih, w_hh, b_ih, b_hh):
    gx, gh = x @ w_ih.T + b_ih, h[0] @ w_hh.T + b_hh if mode == "LSTM" else h @ w_hh.T + b_hh
    if mode == "RNN_RELU":
        return np.maximum(gx + gh, 0)
    if mode == "GRU":
        n = h.shape[-1]
        r, z = _sig(gx[:, :n] + gh[:, :n]), _sig(gx[:, n:2 * n] + gh[:, n:2 * n])
        cand = np.tanh(gx[:, 2 * n:] + r * gh[:, 2 * n:])
        return (1 - z) * cand + z * h
    n = h[0].shape[-1]
    g = gx + gh
    c = _sig(g[:, n:2 * n]) * h[1] + _sig(g[:, :n]) * np.tanh(g[:, 2 * n:3 * n])
    return _sig(g[:, 3 * n:]) * np.tanh(c), c


def _np_rnn(mode, net, x, layers, directions, h0=None):
    """The recurrence written out in NumPy with net's parameters (x: seq first)."""
    p = {n: v.asnumpy().astype(np.float64) for n, v in net.parameters_and_names()}
    hidden = net.hidden_size
    last = []
    for layer in range(layers):
        outs = []
        for d in range(directions):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            k = layer * directions + d
            if h0 is None:
                z = np.zeros((x.shape[1], hidden))
                h = (z, z) if mode == "LSTM" else z
            else:
                h = (h0[0][k], h0[1][k]) if mode == "LSTM" else h0[k]
            seq_out = [None] * x.shape[0]
            for t in (reversed(range(x.shape[0])) if d else range(x.shape[0])):
                h = _np_step(mode, x[t], h, p["weight_ih" + sfx], p["weight_hh" + sfx], p["bias_ih" + sfx],
                             p["bias_hh" + sfx])
                seq_out[t] = h[0] if mode == "LSTM" else h
            outs.append(np.stack(seq_out))
            last.append(h)
        x = np.concatenate(outs, axis=2)
    return x, last


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_lstm_gru_rnn_match_numpy(mode):
    ms.set_context(mode=mode)
    rng = np.random.default_rng(16)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)  # (batch, seq, input) for batch_first
    lstm = nn.LSTM(5, 6, num_layers=2, batch_first=True, bidirectional=True)
    h0 = rng.standard_normal((4, 4, 6)).astype(np.float32)
    c0 = rng.standard_normal((4, 4, 6)).astype(np.float32)
    out, (h_n, c_n) = lstm(ms.Tensor(x), (ms.Tensor(h0), ms.Tensor(c0)))
    want, last = _np_rnn("LSTM", lstm, x.swapaxes(0, 1).astype(np.float64), 2, 2, (h0, c0))
    assert out.shape == (4, 3, 12) and h_n.shape == (4, 4, 6)
    np.testing.assert_allclose(out.asnumpy(), want.swapaxes(0, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h_n.asnumpy(), np.stack([h for h, _ in last]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c_n.asnumpy(), np.stack([c for _, c in last]), rtol=1e-4, atol=1e-5)
    xs = x.swapaxes(0, 1)  # (seq, batch, input)
    gru = nn.GRU(5, 3)
    out, h_n = gru(ms.Tensor(xs))
    want, last = _np_rnn("GRU", gru, xs.astype(np.float64), 1, 1)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h_n.asnumpy(), np.stack(last), rtol=1e-4, atol=1e-5)
    rnn = nn.RNN(5, 4, nonlinearity="relu", num_layers=2)
    out, h_n = rnn(ms.Tensor(xs))
    want, last = _np_rnn("RNN_RELU", rnn, xs.astype(np.float64), 2, 1)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-4, atol=1e-5)
    cell = nn.LSTMCell(5, 6)
    h, c = cell(ms.Tensor(xs[0]))
    p = {n: v.asnumpy().astype(np.float64) for n, v in cell.parameters_and_names()}
    wh, wc = _np_step("LSTM", xs[0].astype(np.float64), (np.zeros((4, 6)), np.zeros((4, 6))), p["weight_ih"],
                      p["weight_hh"], p["bias_ih"], p["bias_hh"])
    np.testing.assert_allclose(h.asnumpy(), wh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c.asnumpy(), wc, rtol=1e-4, atol=1e-5)
    names = [n for n, _ in nn.LSTM(2, 3, bidirectional=True).parameters_and_names()]
    assert names == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                     "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"]
    with pytest.raises(ValueError, match="seq_length is not supported"):
        gru(ms.Tensor(xs), seq_length=ms.Tensor([3, 3, 3, 3]))


def test_lstm_gradient_matches_finite_differences():
    rng = np.random.default_rng(17)
    lstm = nn.LSTM(3, 2, dtype=ms.float64)
    x = ms.Tensor(rng.standard_normal((4, 2, 3)))
    w = lstm.weight_hh_l0

    def loss(weights):
        return (lstm(x)[0] ** 2).sum()

    (g,) = ms.grad(loss, None, [w])(x)
    base = w.asnumpy().copy()
    num = np.zeros_like(base)
    for idx in np.ndindex(*base.shape):
        for sign in (1, -1):
            v = base.copy()
            v[idx] += sign * 1e-6
            w.set_data(ms.Tensor(v))
            num[idx] += sign * float(loss(None).asnumpy()) / 2e-6
    w.set_data(ms.Tensor(base))
    np.testing.assert_allclose(g.asnumpy(), num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_mindspore_primitives_match_numpy(mode):
    ms.set_context(mode=mode)
    a = np.array([[1.5, -2.0, 3.0], [4.0, 0.5, -6.0]], np.float32)

    class Net(nn.Cell):  # primitives made in __init__ and called in construct, as MindSpore code does
        def __init__(self):
            super().__init__()
            self.cast, self.shape, self.concat, self.stack = ops.Cast(), ops.Shape(), ops.Concat(1), ops.Stack(0)
            self.expand, self.squeeze, self.onehot = ops.ExpandDims(), ops.Squeeze(0), ops.OneHot()
            self.argmax, self.rmax, self.rprod = ops.Argmax(), ops.ReduceMax(keep_dims=True), ops.ReduceProd()
            self.select, self.zeros_like, self.gather = ops.Select(), ops.ZerosLike(), ops.Gather()
            self.pow, self.exp, self.maximum, self.equal = ops.Pow(), ops.Exp(), ops.Maximum(), ops.Equal()

        def construct(self, x, labels):
            n, c = self.shape(x)
            hot = self.onehot(labels, c, ms.Tensor(1.0), ms.Tensor(0.0))
            picked = self.gather(x, ms.Tensor([1, 0]), 0)
            positive = self.select(x > 0, x, self.zeros_like(x))
            return (self.cast(x, ms.int32), self.concat((x, hot)), self.stack([x, picked]),
                    self.squeeze(self.expand(x, 0)), self.argmax(x), self.rmax(x, 1), self.rprod(x), positive,
                    self.pow(x, 2.0), self.exp(x), self.maximum(x, hot), self.equal(x, picked))

    labels = np.array([2, 0], np.int32)
    got = [t.asnumpy() for t in Net()(ms.Tensor(a), ms.Tensor(labels))]
    hot = np.eye(3, dtype=np.float32)[labels]
    want = [a.astype(np.int32), np.concatenate((a, hot), 1), np.stack([a, a[[1, 0]]]), a, a.argmax(-1),
            a.max(1, keepdims=True), a.prod(), np.where(a > 0, a, 0), a ** 2, np.exp(a), np.maximum(a, hot),
            a == a[[1, 0]]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5)
    assert got[4].dtype == np.int32  # MindSpore's Argmax gives int32
    np.testing.assert_array_equal(ops.Fill()(ms.float32, (2, 3), 2.5).asnumpy(), np.full((2, 3), 2.5, np.float32))
    assert ops.Size()(ms.Tensor(a)) == 6
    with pytest.raises(ValueError, match="only axis=-1"):
        ops.OneHot(axis=0)


def test_functional_loss_scaling_step():
    from spora.amp import DynamicLossScaler, StaticLossScaler, all_finite
    x, y = _regression_data()
    net = nn.Dense(4, 1)
    loss_fn = nn.MSELoss()
    optimizer = nn.SGD(net.trainable_params(), 0.05)
    scaler = DynamicLossScaler(scale_value=2.0 ** 10, scale_factor=2, scale_window=2)

    def forward_fn(data, label):
        return scaler.scale(loss_fn(net(data), label))

    grad_fn = ms.value_and_grad(forward_fn, None, net.trainable_params())

    def train_step(data, label):
        loss, grads = grad_fn(data, label)
        loss = scaler.unscale(loss)
        is_finite = all_finite(grads)
        if is_finite:
            optimizer(scaler.unscale(grads))
        scaler.adjust(is_finite)
        return loss

    w, b = net.weight.asnumpy().astype(np.float64), net.bias.asnumpy().astype(np.float64)
    for _ in range(3):
        loss = train_step(ms.Tensor(x), ms.Tensor(y)).asnumpy()
        pred = x @ w.T + b
        np.testing.assert_allclose(loss, ((pred - y) ** 2).mean(), rtol=1e-5)
        g = 2 * (pred - y) / pred.size
        w, b = w - 0.05 * g.T @ x, b - 0.05 * g.sum(0)
    np.testing.assert_allclose(net.weight.asnumpy(), w, rtol=1e-5)
    assert scaler.scale_value.asnumpy() == 2.0 ** 11  # grown once after two finite steps
    # An overflowing step updates nothing and halves the scale.
    before = net.weight.asnumpy().copy()
    assert not train_step(ms.Tensor(np.full_like(x, 3e38)), ms.Tensor(y)).asnumpy() < np.inf
    np.testing.assert_array_equal(net.weight.asnumpy(), before)
    assert scaler.scale_value.asnumpy() == 2.0 ** 10 and scaler.counter.asnumpy() == 0
    fixed = StaticLossScaler(8.0)
    np.testing.assert_array_equal(fixed.unscale(fixed.scale(ms.Tensor([1.5, -2.0]))).asnumpy(), [1.5, -2.0])
    assert fixed.adjust(ms.Tensor(np.array(False))) is False


def test_a_mindspore_checkpoint_is_refused_with_the_numpy_route(tmp_path):
    (tmp_path / "from_mindspore.ckpt").write_bytes(b"\x0a\x0c\x0a\x06weight\x12\x02\x08\x01")
    with pytest.raises(ms.SporaValueError, match=r"not a Spora checkpoint.*np\.savez"):
        ms.load_checkpoint(str(tmp_path / "from_mindspore.ckpt"))
    # The route the message gives: weights as NumPy arrays, loaded by name.
    source, target = _mlp(), _mlp()
    np.savez(tmp_path / "weights.npz", **{n: p.asnumpy() for n, p in source.parameters_and_names()})
    not_loaded, _ = ms.load_param_into_net(target, dict(np.load(tmp_path / "weights.npz")))
    assert not_loaded == []
    x = ms.Tensor(np.ones((2, 3, 4), np.float32))
    np.testing.assert_array_equal(target(x).asnumpy(), source(x).asnumpy())


# -- more Tensor methods ---------------------------------------------------------------------


def test_more_tensor_methods_match_numpy():
    rng = np.random.default_rng(18)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    a[1, 2] = np.inf
    a[2, 0] = np.nan
    x = ms.Tensor(a)
    assert (x.numel(), x.nelement(), x.dim(), x.ndimension()) == (12, 12, 2, 2)
    np.testing.assert_array_equal(x.isnan().asnumpy(), np.isnan(a))
    np.testing.assert_array_equal(x.isinf().asnumpy(), np.isinf(a))
    np.testing.assert_array_equal(x.isfinite().asnumpy(), np.isfinite(a))
    np.testing.assert_array_equal(ms.Tensor([1, 2]).isfinite().asnumpy(), [True, True])
    b = rng.standard_normal((3, 4)).astype(np.float32)
    y = ms.Tensor(b)
    for name, want in (("gt", b > 0), ("ge", b >= 0), ("lt", b < 0), ("le", b <= 0), ("ne", b != 0),
                       ("equal", b == 0)):
        np.testing.assert_array_equal(getattr(y, name)(0.0).asnumpy(), want, err_msg=name)
    np.testing.assert_array_equal(y.gt(0).logical_and(y.lt(1)).asnumpy(), (b > 0) & (b < 1))
    np.testing.assert_array_equal(y.gt(0).logical_or(y.lt(-1)).asnumpy(), (b > 0) | (b < -1))
    np.testing.assert_array_equal(y.gt(0).logical_not().asnumpy(), ~(b > 0))
    np.testing.assert_array_equal(y.masked_fill(y > 0, -7.0).asnumpy(), np.where(b > 0, -7.0, b))
    np.testing.assert_array_equal(y.negative().asnumpy(), -b)
    np.testing.assert_array_equal(y.ravel().asnumpy(), b.ravel())
    np.testing.assert_array_equal(y.view_as(ms.Tensor(np.zeros((4, 3)))).asnumpy(), b.reshape(4, 3))
    np.testing.assert_array_equal(ms.Tensor(b[0]).expand_as(y).asnumpy(), np.broadcast_to(b[0], (3, 4)))
    assert y.type_as(ms.Tensor([1])).dtype == ms.int64
    assert y.new_zeros((2, 2)).dtype == ms.float32 and y.new_ones(3, ms.int32).asnumpy().tolist() == [1, 1, 1]
    assert y.tolist() == b.tolist() and y.contiguous() is y and y.is_contiguous()
    c = y.copy()
    c[0, 0] = 100.0
    assert y.asnumpy()[0, 0] == b[0, 0] and c.asnumpy()[0, 0] == 100.0
    np.testing.assert_array_equal(y.gather(ms.Tensor([2, 0]), 1).asnumpy(), np.take(b, [2, 0], axis=1))
    np.testing.assert_array_equal(y.index_select(0, ms.Tensor([1, 1])).asnumpy(), b[[1, 1]])
    np.testing.assert_array_equal(y.gt(0).nonzero().asnumpy(), np.argwhere(b > 0))
    vals, idx = y.sort(axis=1)
    np.testing.assert_array_equal(vals.asnumpy(), np.sort(b, axis=1))
    np.testing.assert_array_equal(idx.asnumpy(), np.argsort(b, axis=1))
    vals, idx = y.sort(axis=0, descending=True)
    np.testing.assert_array_equal(vals.asnumpy(), -np.sort(-b, axis=0))
    vals, idx = y.topk(2)
    np.testing.assert_array_equal(vals.asnumpy(), -np.sort(-b, axis=1)[:, :2])
    v = ms.Tensor(np.arange(10, dtype=np.float32))
    assert [t.asnumpy().tolist() for t in v.split(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [t.shape for t in v.split([3, 7])] == [(3,), (7,)]
    assert [t.shape for t in y.chunk(2, axis=1)] == [(3, 2), (3, 2)]
    np.testing.assert_array_equal(y.repeat(2, axis=1).asnumpy(), np.repeat(b, 2, axis=1))
    np.testing.assert_array_equal(y.repeat([1, 0, 2], axis=0).asnumpy(), np.repeat(b, [1, 0, 2], axis=0))
    np.testing.assert_array_equal(y.repeat(2).asnumpy(), np.repeat(b, 2))
    np.testing.assert_array_equal(y.roll(1, 0).asnumpy(), np.roll(b, 1, 0))
    np.testing.assert_array_equal(y.roll((2, -1), (1, 0)).asnumpy(), np.roll(b, (2, -1), (1, 0)))
    np.testing.assert_array_equal(y.roll(5).asnumpy(), np.roll(b, 5))
    for ord_ in (None, 1, 2, 3, np.inf, -np.inf, 0):
        np.testing.assert_allclose(y.norm(ord_, dim=1).asnumpy(), np.linalg.norm(b, ord_, axis=1), rtol=1e-5,
                                   err_msg=str(ord_))
    np.testing.assert_allclose(y.norm().asnumpy(), np.linalg.norm(b), rtol=1e-5)
    np.testing.assert_array_equal(y.diag().asnumpy(), np.diag(b))
    np.testing.assert_array_equal(ms.Tensor(b[0]).diag().asnumpy(), np.diag(b[0]))
    m1, m2 = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(y.addmm(ms.Tensor(m1), ms.Tensor(m2), beta=0.5, alpha=2.0).asnumpy(),
                               0.5 * b + 2.0 * m1 @ m2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y.lerp(ms.Tensor(m1[:, :4]), 0.25).asnumpy(), b + 0.25 * (m1[:, :4] - b), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(ms.Tensor(b[0]).outer(ms.Tensor(b[1])).asnumpy(), np.outer(b[0], b[1]))


def test_tensor_methods_trace_and_differentiate():
    b = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)

    @ms.jit
    def f(t):
        return t.roll(1, 1).repeat(2, axis=0).norm(dim=1) + t.diag().sum()

    want = np.linalg.norm(np.repeat(np.roll(b, 1, 1), 2, axis=0), axis=1) + np.diag(b).sum()
    np.testing.assert_allclose(f(ms.Tensor(b)).asnumpy(), want, rtol=1e-5)
    g = ms.grad(lambda t: t.norm())(ms.Tensor(b))
    np.testing.assert_allclose(g.asnumpy(), b / np.linalg.norm(b), rtol=1e-5)
    g = ms.grad(lambda t: (t.repeat(3, axis=1) * ms.Tensor(np.arange(18, dtype=np.float32).reshape(2, 9))).sum())(
        ms.Tensor(b))
    np.testing.assert_allclose(g.asnumpy(), np.arange(18, dtype=np.float32).reshape(2, 3, 3).sum(-1))


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_forward_hooks(mode):
    ms.set_context(mode=mode)
    net = nn.SequentialCell(nn.Dense(3, 4), nn.ReLU(), nn.Dense(4, 2))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    w0, b0 = net[0].weight.asnumpy(), net[0].bias.asnumpy()
    w2, b2 = net[2].weight.asnumpy(), net[2].bias.asnumpy()
    seen = []

    def double_input(cell, inputs):
        return (inputs[0] * 2,)

    def record_and_shift(cell, inputs, output):
        seen.append((type(cell).__name__, tuple(output.shape)))
        return output + 1.0

    h1 = net[0].register_forward_pre_hook(double_input)
    h2 = net[1].register_forward_hook(record_and_shift)
    hidden = np.maximum((2 * x) @ w0.T + b0, 0) + 1.0
    np.testing.assert_allclose(net(ms.Tensor(x)).asnumpy(), hidden @ w2.T + b2, rtol=1e-5, atol=1e-5)
    assert seen and seen[0] == ("ReLU", (2, 4))
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(net(ms.Tensor(x)).asnumpy(), np.maximum(x @ w0.T + b0, 0) @ w2.T + b2, rtol=1e-5,
                               atol=1e-5)


# -- vjp / jvp -----------------------------------------------------------------------------


def test_vjp_and_jvp_match_the_jacobian():
    rng = np.random.default_rng(19)
    a = rng.uniform(0.5, 1.5, (3,)).astype(np.float64)
    b = rng.uniform(0.5, 1.5, (3,)).astype(np.float64)

    def fn(x, y):  # (3,) x (3,) -> (3,)
        return ops.sin(x) * y + x * x * x

    # Jacobians of fn in NumPy: diagonal in each input.
    jx = np.diag(np.cos(a) * b + 3 * a * a)
    jy = np.diag(np.sin(a))
    v = rng.standard_normal(3)
    out, vjp_fn = ms.vjp(fn, ms.Tensor(a), ms.Tensor(b))
    np.testing.assert_allclose(out.asnumpy(), np.sin(a) * b + a ** 3, rtol=1e-12)
    gx, gy = vjp_fn(ms.Tensor(v))
    np.testing.assert_allclose(gx.asnumpy(), v @ jx, rtol=1e-12)
    np.testing.assert_allclose(gy.asnumpy(), v @ jy, rtol=1e-12)
    tx, ty = rng.standard_normal(3), rng.standard_normal(3)
    out, jv = ms.jvp(fn, (ms.Tensor(a), ms.Tensor(b)), (ms.Tensor(tx), ms.Tensor(ty)))
    np.testing.assert_allclose(jv.asnumpy(), jx @ tx + jy @ ty, rtol=1e-12)

    def two_outputs(x):  # a tuple output: jvp keeps the structure
        return x * x, x.sum()

    _, (j1, j2) = ms.jvp(two_outputs, ms.Tensor(a), ms.Tensor(tx))
    np.testing.assert_allclose(j1.asnumpy(), 2 * a * tx, rtol=1e-12)
    np.testing.assert_allclose(j2.asnumpy(), tx.sum(), rtol=1e-12)
    out, vjp_fn, aux = ms.vjp(lambda x: (x * 3, x + 1), ms.Tensor(a), has_aux=True)
    np.testing.assert_allclose(aux.asnumpy(), a + 1)
    np.testing.assert_allclose(vjp_fn(ms.Tensor(v))[0].asnumpy(), 3 * v)
    net = nn.Dense(3, 2, dtype=ms.float64)
    w = net.weight.asnumpy()
    _, vjp_fn = ms.vjp(net, ms.Tensor(a.reshape(1, 3)), weights=net.trainable_params())
    (g_in,), (g_w, g_b) = vjp_fn(ms.Tensor(np.array([[1.0, -2.0]])))
    np.testing.assert_allclose(g_in.asnumpy(), np.array([[1.0, -2.0]]) @ w, rtol=1e-12)
    np.testing.assert_allclose(g_w.asnumpy(), np.array([[1.0], [-2.0]]) @ a.reshape(1, 3), rtol=1e-12)
    np.testing.assert_allclose(g_b.asnumpy(), [1.0, -2.0])


# -- mindspore.numpy -------------------------------------------------------------------------


def test_spora_numpy_matches_numpy():
    import spora.numpy as mnp
    rng = np.random.default_rng(20)
    a = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    x, y = mnp.array(a), mnp.asarray(b)

    def same(got, want, **kw):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=kw.get("rtol", 1e-5), atol=kw.get("atol", 1e-6))

    assert mnp.zeros((2, 3)).dtype == ms.float32 and mnp.ones(4).shape == (4,)
    same(mnp.full((2, 2), 1.5), np.full((2, 2), 1.5))
    same(mnp.zeros_like(x), np.zeros_like(a))
    same(mnp.ones_like(x), np.ones_like(a))
    same(mnp.full_like(x, 7.0), np.full_like(a, 7.0))
    same(mnp.arange(2, 11, 3), np.arange(2, 11, 3))
    same(mnp.linspace(-1, 2, 7), np.linspace(-1, 2, 7))
    same(mnp.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))
    same(mnp.eye(3, 4), np.eye(3, 4))
    same(mnp.identity(2), np.identity(2))
    for name in ("add", "subtract", "multiply", "divide", "true_divide", "power", "maximum", "minimum"):
        same(getattr(mnp, name)(x, y), getattr(np, name)(a, b))
        same(getattr(mnp, name)(x, 2.0), getattr(np, name)(a, np.float32(2.0)))
    same(mnp.divide(mnp.arange(5), 2), np.arange(5) / 2)
    for name in ("exp", "log", "sqrt", "square", "sin", "cos", "tanh", "floor", "ceil", "sign", "abs", "absolute",
                 "negative", "reciprocal", "log1p"):
        same(getattr(mnp, name)(x), getattr(np, name)(a))
    same(mnp.clip(x, 0.8, 1.5), np.clip(a, 0.8, 1.5))
    same(mnp.where(x > 1, x, y), np.where(a > 1, a, b))
    for name in ("sum", "mean", "amax", "amin", "max", "min", "prod", "std", "var"):
        same(getattr(mnp, name)(x), getattr(np, name)(a), rtol=1e-4)
        same(getattr(mnp, name)(x, axis=1), getattr(np, name)(a, axis=1), rtol=1e-4)
        same(getattr(mnp, name)(x, axis=0, keepdims=True), getattr(np, name)(a, axis=0, keepdims=True), rtol=1e-4)
    same(mnp.std(x, axis=1, ddof=1), np.std(a, axis=1, ddof=1))
    same(mnp.argmax(x, axis=1), np.argmax(a, axis=1))
    same(mnp.argmin(x), np.argmin(a))
    same(mnp.all(x > 0.6, axis=0), np.all(a > 0.6, axis=0))
    same(mnp.any(x > 1.9), np.any(a > 1.9))
    same(mnp.cumsum(x), np.cumsum(a))
    same(mnp.cumsum(x, axis=1), np.cumsum(a, axis=1))
    same(mnp.reshape(x, (4, 3)), a.reshape(4, 3))
    same(mnp.ravel(x), a.ravel())
    same(mnp.transpose(x), a.T)
    same(mnp.swapaxes(x, 0, 1), a.swapaxes(0, 1))
    same(mnp.squeeze(mnp.expand_dims(x, 1), 1), a)
    same(mnp.broadcast_to(mnp.array(a[0]), (2, 4)), np.broadcast_to(a[0], (2, 4)))
    same(mnp.concatenate((x, y), axis=1), np.concatenate((a, b), axis=1))
    same(mnp.concatenate((x, y), axis=None), np.concatenate((a, b), axis=None))
    same(mnp.stack((x, y), axis=2), np.stack((a, b), axis=2))
    same(mnp.hstack((x, y)), np.hstack((a, b)))
    same(mnp.vstack((x[0], y[1])), np.vstack((a[0], b[1])))
    for got, want in zip(mnp.split(x, 2, axis=1), np.split(a, 2, axis=1)):
        same(got, want)
    for got, want in zip(mnp.split(mnp.arange(7), [2, 5]), np.split(np.arange(7), [2, 5])):
        same(got, want)
    same(mnp.tile(x, (2, 1)), np.tile(a, (2, 1)))
    same(mnp.tile(mnp.array(a[0]), (2, 2)), np.tile(a[0], (2, 2)))
    same(mnp.repeat(x, 2, axis=0), np.repeat(a, 2, axis=0))
    same(mnp.flip(x, 1), np.flip(a, 1))
    for name in ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal"):
        same(getattr(mnp, name)(x, 1.0), getattr(np, name)(a, 1.0))
    special = mnp.array([1.0, np.inf, np.nan])
    same(mnp.isnan(special), [False, False, True])
    same(mnp.isinf(special), [False, True, False])
    same(mnp.isfinite(special), [True, False, False])
    same(mnp.matmul(x, mnp.transpose(y)), a @ b.T, rtol=1e-5)
    same(mnp.dot(x, mnp.transpose(y)), np.dot(a, b.T), rtol=1e-5)
    same(mnp.dot(x[0], y[0]), np.dot(a[0], b[0]), rtol=1e-5)
    same(mnp.outer(x[0], y[1]), np.outer(a[0], b[1]))
    same(mnp.inner(x, y), np.inner(a, b), rtol=1e-5)
    g = ms.grad(lambda t: mnp.sum(mnp.square(t)))(x)
    same(g, 2 * a)


# -- text columns in Tensor iterators ------------------------------------------------------


def test_a_text_column_iterates_as_strings_with_asnumpy():
    # MindSpore gives a String Tensor; Spora a NumPy str array with the same
    # values and Tensor.asnumpy(). Numbers (after Lookup) are Tensors again.
    from spora.dataset import GeneratorDataset, text
    lines = GeneratorDataset(["the cat sat", "a cat ran off"], "line", shuffle=False)
    tokens = lines.map(text.PythonTokenizer(str.split))
    seen = [row[0] for row in tokens.create_tuple_iterator()]
    assert [t.asnumpy().tolist() for t in seen] == [["the", "cat", "sat"], ["a", "cat", "ran", "off"]]
    assert seen[1].shape == (4,) and str(seen[0]) == "['the' 'cat' 'sat']"
    assert [d["line"].tolist() for d in tokens.create_dict_iterator()][0] == ["the", "cat", "sat"]
    vocab = text.Vocab.from_dataset(tokens)
    ids = [row[0] for row in tokens.map(text.Lookup(vocab)).create_tuple_iterator()]
    assert isinstance(ids[0], ms.Tensor) and ids[0].dtype == ms.int32
    assert ids[1].asnumpy().tolist() == [vocab.vocab()[w] for w in ("a", "cat", "ran", "off")]
