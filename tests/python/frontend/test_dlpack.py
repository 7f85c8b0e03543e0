"""DLPack round trips; zero-copy proven by writing through the other side."""
import numpy as np
import pytest

import spora


@pytest.mark.parametrize("npd", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16])
def test_numpy_to_spora_zero_copy(npd):
    a = np.arange(12).reshape(3, 4).astype(npd)
    t = spora.from_dlpack(a)
    assert t.shape == (3, 4) and t.dtype == np.dtype(npd)
    np.testing.assert_array_equal(t.asnumpy(), a)
    a[1, 2] = 1  # write through NumPy: the tensor sees it
    a[0, 0] = 0
    np.testing.assert_array_equal(t.asnumpy(), a)
    # ops read the shared memory too
    np.testing.assert_array_equal((t.astype(spora.float64) * 2).asnumpy(), a.astype(np.float64) * 2)


def test_spora_to_numpy_zero_copy():
    t = spora.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    a[0, 1] = 42.0  # write through NumPy: the tensor sees it
    assert t.asnumpy()[0, 1] == 42.0
    assert t.__dlpack_device__() == (1, 0)


def test_exported_memory_outlives_the_tensor():
    t = spora.Tensor(np.full((1000,), 3.0, np.float32))
    a = np.from_dlpack(t)
    del t
    import gc
    gc.collect()
    junk = [spora.Tensor(np.zeros(1000, np.float32)) for _ in range(10)]
    assert junk and (a == 3.0).all()


def test_imported_memory_outlives_the_array():
    a = np.arange(10, dtype=np.float32)
    t = spora.from_dlpack(a)
    del a
    import gc
    gc.collect()
    np.testing.assert_array_equal(t.asnumpy(), np.arange(10))


def test_round_trip_spora_numpy_spora():
    t = spora.Tensor(np.ones((4,), np.float32))
    u = spora.from_dlpack(np.from_dlpack(t))
    np.from_dlpack(u)[2] = 5.0
    assert t.asnumpy()[2] == 5.0  # all three share one buffer


def test_non_contiguous_and_non_cpu_are_errors():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    with pytest.raises(ValueError, match="C-contiguous"):
        spora.from_dlpack(a)
    s = spora.Tensor([1.0, 2.0], device="sim:0")
    with pytest.raises(ValueError, match="does not share memory with the host"):
        np.from_dlpack(s)


def test_torch_both_directions():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = spora.from_dlpack(x)
    x[1, 1] = 100.0
    assert t.asnumpy()[1, 1] == 100.0
    y = torch.from_dlpack(spora.Tensor(np.ones((2, 2), np.float32)))
    src = spora.Tensor(np.zeros(3, np.float32))
    z = torch.from_dlpack(src)
    z[0] = 7.0
    assert src.asnumpy()[0] == 7.0 and y.sum().item() == 4.0


def test_imported_tensor_is_differentiable():
    a = np.array([1.0, -2.0, 3.0])
    t = spora.from_dlpack(a)
    w = spora.from_dlpack(np.array([0.5, 0.5, 0.5]))
    g = spora.grad(lambda x, y: (x * x * y).sum(), grad_position=(0, 1))(t, w)
    np.testing.assert_allclose(g[0].asnumpy(), a)
    np.testing.assert_allclose(g[1].asnumpy(), a * a)
