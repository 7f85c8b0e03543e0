"""spora.dataset: the IDX reader (plain, gzip, damaged) and batching."""
import gzip
import struct

import numpy as np
import pytest

from spora.dataset import NumpySlicesDataset, load_fashion_mnist, read_idx


def write_idx(path, arr, code=0x08, compress=False):
    head = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    body = arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(head + body)


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, compress):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    p = tmp_path / "a.idx"
    write_idx(p, a, compress=compress)
    np.testing.assert_array_equal(read_idx(p), a)
    f = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    write_idx(tmp_path / "f.idx", f, code=0x0D, compress=compress)
    got = read_idx(tmp_path / "f.idx")
    assert got.dtype == np.float32 and got.dtype.isnative
    np.testing.assert_array_equal(got, f)


def test_read_idx_rejects_damaged_files(tmp_path):
    a = np.zeros((4, 5), np.uint8)
    p = tmp_path / "t.idx"
    write_idx(p, a)
    data = p.read_bytes()
    (tmp_path / "short.idx").write_bytes(data[:-3])
    with pytest.raises(ValueError, match=r"short.idx: truncated: header promises 20 data bytes, file has 17"):
        read_idx(tmp_path / "short.idx")
    (tmp_path / "magic.idx").write_bytes(b"\x01" + data[1:])
    with pytest.raises(ValueError, match="bad magic"):
        read_idx(tmp_path / "magic.idx")
    (tmp_path / "code.idx").write_bytes(data[:2] + b"\x07" + data[3:])
    with pytest.raises(ValueError, match="unknown IDX type code 0x07"):
        read_idx(tmp_path / "code.idx")
    gz = gzip.compress(data)
    (tmp_path / "cut.gz").write_bytes(gz[:len(gz) // 2])
    with pytest.raises(ValueError, match="cut.gz"):
        read_idx(tmp_path / "cut.gz")
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "none.idx")


def test_load_fashion_mnist_from_a_directory(tmp_path):
    imgs = np.random.default_rng(0).integers(0, 256, (5, 28, 28)).astype(np.uint8)
    labels = np.array([0, 9, 3, 3, 1], np.uint8)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", imgs, compress=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
    x, y = load_fashion_mnist("test", root=str(tmp_path))
    assert x.shape == (5, 1, 28, 28) and x.dtype == np.float32 and y.dtype == np.int32
    np.testing.assert_allclose(x[:, 0], imgs / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y, labels)
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_fashion_mnist("train", root=str(tmp_path))
    with pytest.raises(ValueError, match="unknown Fashion-MNIST split"):
        load_fashion_mnist("valid", root=str(tmp_path))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels[:4])
    with pytest.raises(ValueError, match="do not match"):
        load_fashion_mnist("test", root=str(tmp_path))


def test_batching_covers_every_row_once_per_epoch():
    x = np.arange(10)
    y = x * 10
    ds = NumpySlicesDataset((x, y), shuffle=True, seed=3).batch(4)
    assert len(ds) == 3
    epochs = [list(ds) for _ in range(2)]
    for batches in epochs:
        assert [len(b[0]) for b in batches] == [4, 4, 2]
        xs = np.concatenate([b[0] for b in batches])
        assert sorted(xs) == list(range(10))
        np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), xs * 10)
    assert not np.array_equal(np.concatenate([b[0] for b in epochs[0]]), np.concatenate([b[0] for b in epochs[1]]))
    dropped = NumpySlicesDataset((x, y)).batch(4, drop_remainder=True)
    assert len(dropped) == 2 and [b[0].asnumpy().tolist() for b in dropped] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="differ in length"):
        NumpySlicesDataset((x, y[:3]))
    with pytest.raises(ValueError, match="batch_size"):
        NumpySlicesDataset(x).batch(0)
