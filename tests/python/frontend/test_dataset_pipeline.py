"""spora.dataset on the C++ pipeline: IDX sources vs an independent NumPy
read of Debian's Fashion-MNIST, shuffling and sharding, transforms vs NumPy,
determinism across worker counts, batch/repeat counts, damaged files."""
import gzip
import os
import struct

import numpy as np
import pytest

import spora
import spora.dataset as ds
from spora.dataset import transforms, vision

FMNIST = os.environ.get("SPORA_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"
needs_fmnist = pytest.mark.skipif(not os.path.exists(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")),
                                  reason="Debian's dataset-fashion-mnist is not installed")


@pytest.fixture(autouse=True)
def _seed():
    ds.config.set_seed(1234)
    yield
    ds.config.set_seed(0)


def numpy_idx(path, header):
    """Independent reader: skip the header, take the raw bytes."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, np.uint8, offset=header)


def write_idx(path, arr, code=0x08, compress=False):
    head = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    body = arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(head + body)


def all_rows(dataset):
    """One epoch as tuples of NumPy arrays."""
    return [tuple(r) for r in dataset.create_tuple_iterator(output_numpy=True)]


def ids_of(dataset):
    """One epoch of a one-column dataset of scalars, iterated as MindSpore
    users do (`for row in ds`: a list of Tensors per row)."""
    out = []
    for row in dataset:
        assert isinstance(row, list) and len(row) == 1 and isinstance(row[0], spora.Tensor)
        out.append(int(row[0]))
    return out


@needs_fmnist
@pytest.mark.parametrize("usage,prefix,n", [("test", "t10k", 10000), ("train", "train", 60000)])
def test_fashion_mnist_matches_numpy_read(usage, prefix, n):
    images = numpy_idx(os.path.join(FMNIST, f"{prefix}-images-idx3-ubyte.gz"), 16).reshape(n, 28, 28)
    labels = numpy_idx(os.path.join(FMNIST, f"{prefix}-labels-idx1-ubyte.gz"), 8)
    d = ds.FashionMnistDataset(FMNIST, usage=usage, shuffle=False)
    assert d.get_dataset_size() == n and d.get_col_names() == ["image", "label"]
    (x, y), = all_rows(d.batch(n))
    assert x.dtype == np.uint8 and x.shape == (n, 28, 28, 1) and y.dtype == np.int32
    np.testing.assert_array_equal(x[..., 0], images)
    np.testing.assert_array_equal(y, labels)


@needs_fmnist
def test_fashion_mnist_shuffled_epochs_are_permutations_and_reproducible():
    d = ds.FashionMnistDataset(FMNIST, usage="test", shuffle=True).batch(10000)
    (x0, y0), = all_rows(d)
    (x1, y1), = all_rows(d)  # the next epoch
    base = numpy_idx(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz"), 16).reshape(10000, 784)
    # Each shuffled image is found in the file exactly once (rows are unique).
    key = {row.tobytes(): i for i, row in enumerate(base)}
    order0 = [key[r.tobytes()] for r in x0.reshape(10000, 784)]
    order1 = [key[r.tobytes()] for r in x1.reshape(10000, 784)]
    assert sorted(order0) == list(range(10000)) and sorted(order1) == list(range(10000))
    assert order0 != order1 and order0 != list(range(10000))
    again = ds.FashionMnistDataset(FMNIST, usage="test", shuffle=True).batch(10000)
    (x2, _), = all_rows(again)
    np.testing.assert_array_equal(x0, x2)  # same seed, same epoch
    ds.config.set_seed(99)
    other = ds.FashionMnistDataset(FMNIST, usage="test", shuffle=True).batch(10000)
    (x3, _), = all_rows(other)
    assert not np.array_equal(x0, x3)


@pytest.mark.parametrize("n,shards", [(40, 4), (41, 4), (10, 3)])
def test_shards_disjoint_equal_and_covering(n, shards):
    ids = np.arange(n, dtype=np.int32)
    seen = []
    for k in range(shards):
        d = ds.NumpySlicesDataset({"id": ids}, shuffle=True, num_shards=shards, shard_id=k)
        got = ids_of(d)
        assert len(got) == d.get_dataset_size() == -(-n // shards)
        assert len(set(got)) == len(got)
        seen += got
    assert set(seen) == set(range(n))                      # covering
    assert len(seen) - n == (-n) % shards                  # only the wrap-around padding repeats
    with pytest.raises(ValueError, match="num_shards and shard_id go together"):
        ds.NumpySlicesDataset(ids, num_shards=2)
    with pytest.raises(ValueError, match=r"shard_id 2 is not in \[0, 2\)"):
        ds.NumpySlicesDataset(ids, num_shards=2, shard_id=2)


def test_buffered_shuffle_is_a_reproducible_permutation():
    ids = np.arange(100, dtype=np.int32)
    d = ds.NumpySlicesDataset(ids).shuffle(16)
    e0, e1 = ids_of(d), ids_of(d)
    assert sorted(e0) == list(range(100)) and sorted(e1) == list(range(100))
    assert e0 != list(range(100)) and e0 != e1
    assert ids_of(ds.NumpySlicesDataset(ids).shuffle(16)) == e0


def augment(workers, seed=7):
    ds.config.set_seed(seed)
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (50, 12, 10, 3)).astype(np.uint8)
    d = ds.NumpySlicesDataset({"image": imgs, "label": np.arange(50, dtype=np.int32)}, shuffle=True)
    d = d.map([vision.RandomCrop((8, 9), padding=2), vision.RandomHorizontalFlip(0.5),
               vision.Normalize([10.0, 20.0, 30.0], [2.0, 4.0, 8.0]), vision.HWC2CHW()],
              input_columns="image", num_parallel_workers=workers).batch(7)
    return imgs, [b for _ in range(2) for b in all_rows(d)]


def test_same_output_for_1_and_4_workers():
    _, one = augment(1)
    _, four = augment(4)
    _, two = augment(2)
    assert len(one) == 16  # 2 epochs of ceil(50 / 7) batches
    for a, b, c in zip(one, four, two):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[0], c[0])
        np.testing.assert_array_equal(a[1], b[1])
    _, other = augment(1, seed=8)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(one, other))


def test_crop_flip_normalize_match_numpy():
    imgs, batches = augment(2)
    mean, std = np.array([10, 20, 30], np.float32), np.array([2, 4, 8], np.float32)
    offsets, flips = set(), 0
    total = 0
    for x, labels in batches:
        assert x.shape[1:] == (3, 8, 9) and x.dtype == np.float32
        for chw, label in zip(x, labels):
            hwc = chw.transpose(1, 2, 0) * std + mean            # undo Normalize and HWC2CHW
            padded = np.pad(imgs[label].astype(np.float32), ((2, 2), (2, 2), (0, 0)))
            found = None
            for flip in (False, True):
                for top in range(padded.shape[0] - 8 + 1):
                    for left in range(padded.shape[1] - 9 + 1):
                        win = padded[top:top + 8, left:left + 9]
                        if flip:
                            win = win[:, ::-1]
                        if np.allclose(win, hwc, atol=1e-3):
                            found = (flip, top, left)
                            break
                    if found:
                        break
                if found:
                    break
            assert found is not None, f"sample {label}: no padded window matches"
            flips += found[0]
            offsets.add(found[1:])
            total += 1
    assert total == 100
    # 100 fair coin flips: 50 +- 5 (4 sigma = 20)
    assert 30 <= flips <= 70
    # 9 x 6 = 54 possible windows; 100 uniform draws hit well over a third of them
    assert len(offsets) > 20


def test_normalize_rescale_cast_onehot_values():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (6, 5, 4, 2)).astype(np.uint8)
    lab = np.array([0, 3, 1, 2, 3, 0], np.int32)
    d = ds.NumpySlicesDataset((img, lab), column_names=["image", "label"])
    out = d.map([vision.Rescale(1 / 255, -0.5)], "image").map(
        [transforms.OneHot(4), transforms.TypeCast(np.float32)], "label").batch(6)
    (x, y), = all_rows(out)
    np.testing.assert_allclose(x, img.astype(np.float32) * np.float32(1 / 255) - 0.5, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(y, np.eye(4, dtype=np.float32)[lab])
    chw = d.map([vision.Normalize([100, 50], [20, 10]), vision.HWC2CHW()], "image").batch(6)
    (x, _), = all_rows(chw)
    ref = ((img.astype(np.float32) - np.array([100, 50], np.float32)) / np.array([20, 10], np.float32))
    np.testing.assert_allclose(x, ref.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)
    cast = d.map([transforms.TypeCast("int32")], "image").batch(6)
    (x, _), = all_rows(cast)
    assert x.dtype == np.int32
    np.testing.assert_array_equal(x, img.astype(np.int32))
    with pytest.raises(spora.SporaError, match=r"one_hot\] label 3 is outside \[0, 3\)"):
        list(d.map([transforms.OneHot(3)], "label"))


def test_batch_repeat_drop_remainder_counts():
    ids = np.arange(23, dtype=np.int32)
    d = ds.NumpySlicesDataset(ids)
    assert d.batch(5).get_dataset_size() == 5 and len(list(d.batch(5))) == 5
    assert [len(b[0]) for b in all_rows(d.batch(5))] == [5, 5, 5, 5, 3]
    assert d.batch(5, drop_remainder=True).get_dataset_size() == 4
    assert [len(b[0]) for b in all_rows(d.batch(5, drop_remainder=True))] == [5] * 4
    r = d.repeat(3).batch(10)
    assert r.get_dataset_size() == 7
    flat = np.concatenate([b[0] for b in all_rows(r)])
    np.testing.assert_array_equal(flat, np.tile(ids, 3))
    shuffled = d.shuffle(8).repeat(2)
    vals = ids_of(shuffled)
    assert sorted(vals[:23]) == list(range(23)) and sorted(vals[23:]) == list(range(23))
    assert vals[:23] != vals[23:]  # each pass reshuffled
    with pytest.raises(spora.SporaError, match="batch_size must be >= 1"):
        d.batch(0)


def test_iterators_tensors_dicts_and_epochs():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6, dtype=np.int32)
    d = ds.NumpySlicesDataset((x, y), column_names=["x", "y"]).batch(4)
    it = d.create_tuple_iterator()
    rows = list(it)
    assert len(rows) == 2 and isinstance(rows[0][0], spora.Tensor)
    np.testing.assert_array_equal(rows[0][0].asnumpy(), x[:4])
    assert len(list(it)) == 2  # re-iterating starts the next epoch
    dicts = list(d.create_dict_iterator(output_numpy=True))
    assert set(dicts[0]) == {"x", "y"} and isinstance(dicts[1]["y"], np.ndarray)
    np.testing.assert_array_equal(dicts[1]["y"], y[4:])
    only_y = list(d.create_tuple_iterator(columns=["y"], output_numpy=True))
    assert len(only_y[0]) == 1
    with pytest.raises(ValueError, match="no column 'z'"):
        d.map(vision.HWC2CHW(), input_columns="z")
    with pytest.raises(TypeError, match="neither a spora.dataset transform nor a callable"):
        d.map(3)


def test_damaged_files_are_named(tmp_path):
    imgs = np.random.default_rng(0).integers(0, 256, (5, 28, 28)).astype(np.uint8)
    labels = np.array([0, 9, 3, 3, 1], np.uint8)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", imgs, compress=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
    d = ds.MnistDataset(tmp_path, usage="test", shuffle=False)
    (x, y), = all_rows(d.batch(5))
    np.testing.assert_array_equal(x, imgs[..., None])
    np.testing.assert_array_equal(y, labels)
    # mismatched sample counts
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels[:4])
    with pytest.raises(spora.SporaError, match=r"mismatched sample counts.*t10k-labels-idx1-ubyte has 4"):
        ds.MnistDataset(tmp_path, usage="test")
    # truncated gzip stream
    raw = (tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes()
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(raw[:len(raw) // 2])
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
    with pytest.raises(spora.SporaError, match="t10k-images-idx3-ubyte.gz"):
        ds.MnistDataset(tmp_path, usage="test")
    # garbled magic number, plain file
    (tmp_path / "t10k-images-idx3-ubyte.gz").unlink()
    write_idx(tmp_path / "t10k-images-idx3-ubyte", imgs)
    body = bytearray((tmp_path / "t10k-images-idx3-ubyte").read_bytes())
    body[1] = 0x42
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(bytes(body))
    with pytest.raises(spora.SporaError, match=r"t10k-images-idx3-ubyte: not an IDX file \(bad magic number\)"):
        ds.MnistDataset(tmp_path, usage="test")
    # truncated plain file
    write_idx(tmp_path / "t10k-images-idx3-ubyte", imgs)
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes((tmp_path / "t10k-images-idx3-ubyte").read_bytes()[:-100])
    with pytest.raises(spora.SporaError, match=r"t10k-images-idx3-ubyte: truncated: header \(5, 28, 28\) promises 3920"):
        ds.MnistDataset(tmp_path, usage="test")
    # a 20-byte header claiming 2^33 f64 elements (64 GiB): an error, not an
    # allocation sized by the header
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(
        bytes([0, 0, 0x0E, 3]) + struct.pack(">III", 1 << 13, 1 << 10, 1 << 10))
    with pytest.raises(spora.SporaError, match=r"t10k-images-idx3-ubyte: truncated: header \(8192, 1024, 1024\)"):
        ds.MnistDataset(tmp_path, usage="test")
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        ds.MnistDataset(tmp_path, usage="train")
    with pytest.raises(ValueError, match="usage must be 'train', 'test', 'all' or None"):
        ds.MnistDataset(tmp_path, usage="valid")
