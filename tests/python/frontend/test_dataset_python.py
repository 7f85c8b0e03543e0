"""spora.dataset with Python in the pipeline: MnistDataset's default usage
and HWC images, GeneratorDataset sources (random access, iterables,
generator functions) with shuffle, samplers and shards, Python functions
in map on threads and processes (order, errors with the user's line,
timeouts), Compose and transforms called on one image."""
import gzip
import os
import struct
import time
import traceback

import numpy as np
import pytest

import spora
import spora.dataset as ds
from spora.dataset import GeneratorDataset, transforms, vision


@pytest.fixture(autouse=True)
def _config():
    ds.config.set_seed(5)
    yield
    ds.config.set_seed(0)
    ds.config.set_python_op_timeout(300)


def rows(d):
    return [tuple(r) for r in d.create_tuple_iterator(output_numpy=True)]


def write_idx(path, arr, compress=False):
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(head + arr.astype(np.uint8).tobytes())


def mnist_dir(root, splits):
    rng = np.random.default_rng(3)
    data = {}
    for prefix, n in splits:
        img = rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)
        lab = rng.integers(0, 10, n).astype(np.uint8)
        write_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte"), img, compress=prefix == "t10k")
        write_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte"), lab)
        data[prefix] = (img, lab)
    return data


# -- MnistDataset as MindSpore reads it ---------------------------------------------------


def test_mnist_default_usage_reads_what_the_folder_holds(tmp_path):
    train_dir, test_dir, both = tmp_path / "train", tmp_path / "test", tmp_path / "both"
    for p in (train_dir, test_dir, both):
        p.mkdir()
    tr = mnist_dir(train_dir, [("train", 6)])["train"]
    te = mnist_dir(test_dir, [("t10k", 4)])["t10k"]
    mnist_dir(both, [("train", 6), ("t10k", 4)])
    d = ds.MnistDataset(str(train_dir), shuffle=False)  # MindSpore tutorial: MnistDataset('MNIST_Data/train')
    assert d.get_dataset_size() == 6 and d.get_col_names() == ["image", "label"]
    image, label = next(d.create_tuple_iterator())
    assert isinstance(image, spora.Tensor) and image.shape == (28, 28, 1) and image.dtype == spora.uint8
    np.testing.assert_array_equal(image.asnumpy()[..., 0], tr[0][0])
    assert int(label) == tr[1][0]
    (x, y), = rows(ds.MnistDataset(str(test_dir), shuffle=False).batch(10))
    np.testing.assert_array_equal(x[..., 0], te[0])
    np.testing.assert_array_equal(y, te[1])
    (x, y), = rows(ds.MnistDataset(str(both), usage="all", shuffle=False).batch(20))
    assert x.shape == (10, 28, 28, 1)  # train first, then test
    np.testing.assert_array_equal(y, np.concatenate([mnist_dir(tmp_path, [("train", 6), ("t10k", 4)])[k][1]
                                                     for k in ("train", "t10k")]))
    assert ds.MnistDataset(str(both), usage="test").get_dataset_size() == 4
    with pytest.raises(FileNotFoundError, match="no MNIST files in"):
        ds.MnistDataset(str(tmp_path / "nothing-here"))


def test_mnist_tutorial_pipeline_gives_nchw_float_batches(tmp_path):
    mnist_dir(tmp_path, [("t10k", 10)])
    d = ds.MnistDataset(str(tmp_path))
    d = d.map([vision.Rescale(1.0 / 255.0, 0), vision.Normalize(mean=(0.1307,), std=(0.3081,)), vision.HWC2CHW()],
              "image")
    d = d.map(transforms.TypeCast(spora.int32), "label").batch(4)
    image, label = next(d.create_tuple_iterator())
    assert image.shape == (4, 1, 28, 28) and image.dtype == spora.float32 and label.dtype == spora.int32
    batches = [b for b in d]  # MindSpore: `for data in dataset` gives lists of Tensors
    assert [b[0].shape[0] for b in batches] == [4, 4, 2] and isinstance(batches[0], list)


# -- GeneratorDataset ---------------------------------------------------------------------


class RandomAccess:
    def __init__(self, n=6):
        self.x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
        self.y = np.arange(n, dtype=np.int32)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.y)


def test_generator_random_access_list_iterable_and_function():
    d = GeneratorDataset(RandomAccess(), ["data", "label"], shuffle=False)
    assert d.get_col_names() == ["data", "label"] and d.get_dataset_size() == 6
    got = list(d)
    assert len(got) == 6 and isinstance(got[0][0], spora.Tensor)
    np.testing.assert_array_equal(got[2][0].asnumpy(), [4, 5])
    assert [int(r[1]) for r in got] == list(range(6))
    # a list of arrays: one column; Python ints become int64 scalars
    d = GeneratorDataset([np.array(0), np.array(1), np.array(2)], column_names=["data"], shuffle=False)
    assert [int(r[0]) for r in d] == [0, 1, 2]
    (v,), = rows(GeneratorDataset([7], "data"))
    assert v.dtype == np.int64 and v.shape == ()

    class Iterable:
        def __init__(self, start, end):
            self.start, self.end = start, end

        def __next__(self):
            return next(self.data)

        def __iter__(self):
            self.data = iter(range(self.start, self.end))
            return self

    d = GeneratorDataset(source=Iterable(1, 5), column_names=["it"])
    assert d.get_dataset_size() == 4
    assert [int(r[0]) for r in d] == [1, 2, 3, 4] == [int(r[0]) for r in d]  # every epoch afresh

    def gen(start, end):
        for i in range(start, end):
            yield i, float(i) / 2

    d = GeneratorDataset(source=lambda: gen(3, 6), column_names=["a", "b"])
    assert [(int(a), float(b)) for a, b in d] == [(3, 1.5), (4, 2.0), (5, 2.5)]
    one_shot = GeneratorDataset(gen(0, 2), ["a", "b"])
    assert len(list(one_shot)) == 2
    with pytest.raises(ValueError, match="generator object can be iterated once"):
        list(one_shot)


def test_generator_shuffle_sampler_shards_are_reproducible():
    src = list(range(20))
    d = GeneratorDataset(src, "v")  # random access: shuffled by default
    e0, e1 = [int(r[0]) for r in d], [int(r[0]) for r in d]
    assert sorted(e0) == src and sorted(e1) == src and e0 != src and e0 != e1
    assert [int(r[0]) for r in GeneratorDataset(src, "v")] == e0  # same seed, same epoch
    seen = []
    for k in range(3):
        part = GeneratorDataset(src, "v", num_shards=3, shard_id=k)
        got = [int(r[0]) for r in part]
        assert len(got) == part.get_dataset_size() == 7
        seen += got
    assert set(seen) == set(src)
    d = GeneratorDataset(src, "v", sampler=ds.SequentialSampler(start_index=2, num_samples=5))
    assert [int(r[0]) for r in d] == [2, 3, 4, 5, 6] and d.get_dataset_size() == 5
    d = GeneratorDataset(src, "v", sampler=[4, 1, 1, 9])
    assert [int(r[0]) for r in d] == [4, 1, 1, 9]
    d = GeneratorDataset(src, "v", sampler=ds.DistributedSampler(2, 1, shuffle=False))
    assert [int(r[0]) for r in d] == list(range(1, 20, 2))
    d = GeneratorDataset(src, "v", sampler=ds.SubsetRandomSampler([3, 5, 7]))
    assert sorted(int(r[0]) for r in d) == [3, 5, 7]
    assert GeneratorDataset(src, "v", num_samples=4).get_dataset_size() == 4
    # iterables: no shuffle or sampler (an error, not a silent sequential order); shards take every N-th row
    with pytest.raises(ValueError, match="need a random-access source"):
        GeneratorDataset(lambda: iter(src), "v", shuffle=True)
    d = GeneratorDataset(lambda: iter(src), "v", num_shards=4, shard_id=1)
    assert [int(r[0]) for r in d] == [1, 5, 9, 13, 17] and d.get_dataset_size() == 5


def test_generator_parallel_workers_keep_the_order():
    src = RandomAccess(40)
    ref = rows(GeneratorDataset(src, ["x", "y"], shuffle=True))
    for workers, procs in ((4, False), (3, True)):
        got = rows(GeneratorDataset(src, ["x", "y"], shuffle=True, num_parallel_workers=workers,
                                    python_multiprocessing=procs))
        assert [int(r[1]) for r in got] == [int(r[1]) for r in ref]


def test_generator_bad_rows_are_explained():
    with pytest.raises(ValueError, match=r"gave 2 value\(s\) in a row but column_names has 1"):
        list(GeneratorDataset([(1, 2)], "a"))
    with pytest.raises(ValueError, match="column_names is required"):
        GeneratorDataset([1, 2])
    with pytest.raises(TypeError, match="holds Python objects .* iterate with output_numpy=True"):
        list(GeneratorDataset([np.array([{"a": 1}], dtype=object)], "obj"))
    (t,), = rows(GeneratorDataset(["some text"], "text"))
    assert str(t) == "some text"
    with pytest.raises(TypeError, match="int16, which spora Tensors do not hold"):
        list(GeneratorDataset([np.int16(3)], "v"))


# -- Python functions in map ----------------------------------------------------------------


def test_python_map_values_order_and_columns():
    d = GeneratorDataset([1, 2, 3], "data", shuffle=False)
    d = d.map(lambda x: x * 2)
    assert [int(r[0]) for r in d] == [2, 4, 6]
    d = d.map(lambda x: x * x + 2)
    assert [int(r[0]) for r in d] == [6, 18, 38]
    # two columns in, three out, renamed and placed where the inputs were
    base = GeneratorDataset(RandomAccess(5), ["x", "y"], shuffle=False).map(lambda y: y + 100, "y", ["z"])
    assert base.get_col_names() == ["x", "z"]
    split = base.map(lambda x, z: (x[0], x[1], z * 2), ["x", "z"], ["a", "b", "c"])
    assert split.get_col_names() == ["a", "b", "c"]
    r = rows(split)
    assert [(float(a), float(b), int(c)) for a, b, c in r][:2] == [(0.0, 1.0, 200), (2.0, 3.0, 202)]
    # Python and built-in operations mixed; the order holds for any worker count, threads or processes
    imgs = np.random.default_rng(0).integers(0, 256, (30, 6, 5, 3)).astype(np.uint8)
    src = ds.NumpySlicesDataset({"image": imgs, "label": np.arange(30, dtype=np.int32)}, shuffle=True)
    ops = [lambda im: im[:, ::-1], vision.Rescale(1 / 255, 0), vision.HWC2CHW()]
    ref = rows(src.map(ops, "image", num_parallel_workers=1).batch(8))
    for workers, procs in ((4, False), (2, True)):
        got = rows(src.map(ops, "image", num_parallel_workers=workers, python_multiprocessing=procs).batch(8))
        for (a, la), (b, lb) in zip(ref, got):
            np.testing.assert_array_equal(la, lb)
            np.testing.assert_array_equal(a, b)
    x, labels = ref[0]
    np.testing.assert_allclose(x[0], (imgs[labels[0]][:, ::-1].astype(np.float32) / 255).transpose(2, 0, 1),
                               rtol=1e-6)
    # Python map on a C++ pipeline, then built-in random transforms on the Python side: reproducible
    aug = src.map(lambda im: im + 1, "image").map(vision.RandomHorizontalFlip(0.5), "image")
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(rows(aug), rows(aug.map(lambda im: im, "image"))))


def failing(x):
    if int(x) == 13:
        raise KeyError(f"no entry for {int(x)}")  # the user's line
    return x


FAILING_LINE = failing.__code__.co_firstlineno + 2


@pytest.mark.parametrize("procs", [False, True])
def test_an_error_in_a_user_function_reaches_the_loop_within_its_batch(procs):
    d = GeneratorDataset(list(range(40)), "v", shuffle=False).map(failing, num_parallel_workers=2,
                                                                python_multiprocessing=procs).batch(5)
    seen = 0
    with pytest.raises(KeyError, match="no entry for 13") as info:
        for _ in d:
            seen += 1
    assert seen == 2  # batches 0 and 1 arrived; row 13 is in batch 2
    text = "".join(traceback.format_exception(info.value))
    assert f'line {FAILING_LINE}, in failing' in text and "raise KeyError" in text
    assert "raised by map(failing) on v on row 13 of epoch 0" in text


def test_a_hung_function_hits_the_timeout():
    ds.config.set_python_op_timeout(0.5)

    def slow(x):
        if int(x) == 2:
            time.sleep(30)
        return x

    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"map\(.*slow\) on v did not finish row 2 of epoch 0 within 0.5 s "
                                           r"\(worker thread\).*set_python_op_timeout"):
        list(GeneratorDataset([0, 1, 2, 3], "v", shuffle=False).map(slow))
    with pytest.raises(TimeoutError, match=r"\(worker process\)"):
        list(GeneratorDataset([0, 1, 2, 3], "v", shuffle=False).map(slow, num_parallel_workers=2,
                                                                      python_multiprocessing=True))

    def stuck():
        yield 1
        time.sleep(30)
        yield 2

    with pytest.raises(TimeoutError, match=r"GeneratorDataset source \(next\(\)\) did not finish row 1"):
        list(GeneratorDataset(stuck, "v"))
    assert time.monotonic() - t0 < 20
    with pytest.raises(ValueError, match="python_op_timeout must be >= 0"):
        ds.config.set_python_op_timeout(-1)


# -- transforms on one sample, Compose ----------------------------------------------------


def test_transforms_called_on_one_image_match_the_pipeline():
    rng = np.random.default_rng(2)
    img = rng.integers(0, 256, (7, 5, 3)).astype(np.uint8)
    chain = [vision.Rescale(1.0 / 255.0, 0), vision.Normalize(mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3)),
             vision.HWC2CHW(), transforms.TypeCast(np.float64)]
    eager = img
    for t in chain:
        eager = t(eager)
    assert eager.shape == (3, 7, 5) and eager.dtype == np.float64
    (piped,), = rows(ds.NumpySlicesDataset({"image": img[None]}).map(chain).batch(1))
    np.testing.assert_allclose(eager, piped[0], rtol=1e-6, atol=1e-6)
    composed = transforms.Compose(chain)
    np.testing.assert_array_equal(composed(img), eager)
    # a Compose of built-ins in map stays in C++; with a Python callable it runs in Python
    (c1,), = rows(ds.NumpySlicesDataset({"image": img[None]}).map(composed).batch(1))
    np.testing.assert_array_equal(c1, piped)
    both = transforms.Compose([lambda a: a[::-1], vision.HWC2CHW()])
    (c2,), = rows(ds.NumpySlicesDataset({"image": img[None]}).map(both).batch(1))
    np.testing.assert_array_equal(c2[0], img[::-1].transpose(2, 0, 1))
    # MindSpore tutorial: a 2-D image, then expand_dims and HWC2CHW
    hw = rng.integers(0, 255, (48, 48), np.uint8)
    norm = vision.Normalize(mean=(0.1307,), std=(0.3081,))(vision.Rescale(1.0 / 255.0, 0)(hw))
    np.testing.assert_allclose(norm, (hw / 255.0 - 0.1307) / 0.3081, rtol=1e-5, atol=1e-5)
    assert vision.HWC2CHW()(np.expand_dims(norm, -1)).shape == (1, 48, 48)
    assert transforms.OneHot(4)(np.int32(2)).tolist() == [0, 0, 1, 0]
    assert transforms.TypeCast(np.int32)(np.array([1.7, -2.5, np.nan])).tolist() == [1, -2, 0]
    flipped = vision.RandomHorizontalFlip(1.0)(img)
    np.testing.assert_array_equal(flipped, img[:, ::-1])
    crop = vision.RandomCrop((4, 3), padding=1)(img)
    assert crop.shape == (4, 3, 3)
    with pytest.raises(ValueError, match=r"normalize\] 3 means for an image of 1 channels"):
        vision.Normalize((1, 2, 3), (1, 1, 1))(hw)
    with pytest.raises(TypeError, match="is not a transform or a callable"):
        transforms.Compose([vision.HWC2CHW(), 3])


# -- CSVDataset, take/skip ------------------------------------------------------------------


def test_csv_dataset_types_defaults_header_and_errors(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("id,score,name\n1,0.5,ann\n2,,bob\n3,1.25,\n")
    b = tmp_path / "b.csv"
    b.write_text("id,score,name\n4,2.0,dan\n")
    d = ds.CSVDataset([str(a), str(b)], column_defaults=[0, -1.0, "?"], shuffle=False)
    assert d.get_col_names() == ["id", "score", "name"] and d.get_dataset_size() == 4
    r = rows(d)
    assert [int(x[0]) for x in r] == [1, 2, 3, 4] and r[0][0].dtype == np.int64
    assert [float(x[1]) for x in r] == [0.5, -1.0, 1.25, 2.0] and r[0][1].dtype == np.float32
    assert [str(x[2]) for x in r] == ["ann", "bob", "?", "dan"]
    ids, scores = next(d.project(["id", "score"]).batch(4).create_tuple_iterator())
    assert isinstance(ids, spora.Tensor) and ids.asnumpy().tolist() == [1, 2, 3, 4]
    # no column_defaults: strings, as MindSpore; a glob; shuffled by default
    s = ds.CSVDataset(str(tmp_path / "*.csv"))
    assert sorted(int(str(x[0])) for x in rows(s)) == [1, 2, 3, 4]
    # column_names given: the first line is data
    c = tmp_path / "c.csv"
    c.write_text("7;x\n8;y\n")
    assert [(int(i), str(n)) for i, n in rows(ds.CSVDataset(str(c), field_delim=";", column_defaults=[0, ""],
                                                               column_names=["i", "n"], shuffle=False))] == \
        [(7, "x"), (8, "y")]
    bad = tmp_path / "bad.csv"
    bad.write_text("id,score\n1,0.5\n2,abc\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 3, column 'score': 'abc' is not a float"):
        ds.CSVDataset(str(bad), column_defaults=[0, 0.0])
    bad.write_text("id,score\n1,0.5,9\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 2: 3 fields, expected 2"):
        ds.CSVDataset(str(bad))
    with pytest.raises(FileNotFoundError, match="missing.csv: no such file"):
        ds.CSVDataset(str(tmp_path / "missing.csv"))


def test_take_and_skip():
    d = ds.NumpySlicesDataset(np.arange(10, dtype=np.int32))
    assert [int(r[0]) for r in d.take(3)] == [0, 1, 2] and d.take(3).get_dataset_size() == 3
    assert [int(r[0]) for r in d.skip(8)] == [8, 9] and len(d.skip(8)) == 2
    (b,), = rows(d.skip(2).take(3).batch(3))
    assert b.tolist() == [2, 3, 4]


# -- ImageFolderDataset and Decode (libjpeg-turbo, libpng) ----------------------------------


def image_tree(root):
    from PIL import Image  # matplotlib's dependency: in the test environment
    rng = np.random.default_rng(4)
    pics = {}
    for cls, n in (("cat", 2), ("dog", 3)):
        (root / cls).mkdir()
        for i in range(n):
            rgb = rng.integers(0, 256, (5 + i, 7, 3)).astype(np.uint8)
            if i % 2 == 0:
                path = root / cls / f"{i}.png"
                Image.fromarray(rgb).save(path)
                pics[str(path)] = rgb
            else:
                path = root / cls / f"{i}.jpg"
                Image.fromarray(rgb).save(path, quality=95)
                pics[str(path)] = np.asarray(Image.open(path).convert("RGB"))  # PIL's own decode
    (root / "dog" / "notes.txt").write_text("not an image")
    return pics


def test_image_folder_decodes_jpeg_and_png(tmp_path):
    pics = image_tree(tmp_path)
    d = ds.ImageFolderDataset(str(tmp_path), extensions=[".png", ".jpg"], shuffle=False)
    assert d.get_dataset_size() == 5 and d.get_class_indexing() == {"cat": 0, "dog": 1}
    raw = rows(d)
    assert raw[0][0].dtype == np.uint8 and raw[0][0].ndim == 1 and [int(r[1]) for r in raw] == [0, 0, 1, 1, 1]
    decoded = rows(d.map(vision.Decode(), "image"))
    eager = rows(ds.ImageFolderDataset(str(tmp_path), extensions=[".png", ".jpg"], shuffle=False, decode=True))
    for (img, _), (img2, _), path in zip(decoded, eager, d.files):
        want = pics[path]
        assert img.shape == want.shape and img.dtype == np.uint8
        np.testing.assert_array_equal(img, img2)
        if path.endswith(".png"):
            np.testing.assert_array_equal(img, want)  # lossless
        else:
            assert np.abs(img.astype(int) - want).max() <= 2  # libjpeg-turbo vs PIL's bundled one
    # one image, eagerly, from bytes; grey PNG expands to RGB
    from PIL import Image
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    Image.fromarray(grey).save(tmp_path / "g.png")
    rgb = vision.Decode()((tmp_path / "g.png").read_bytes())
    assert rgb.shape == (3, 4, 3) and (rgb == grey[..., None]).all()
    # class_indexing picks and numbers classes
    only = ds.ImageFolderDataset(str(tmp_path), class_indexing={"dog": 7}, extensions=[".jpg", ".png"])
    assert sorted(int(r[1]) for r in rows(only)) == [7, 7, 7]
    # the tutorial-style pipeline to NCHW float batches
    b = ds.ImageFolderDataset(str(tmp_path), extensions=[".png"], decode=True).map(
        [vision.RandomCrop(4), vision.Rescale(1 / 255, 0), vision.HWC2CHW()], "image").batch(3)
    image, label = next(b.create_tuple_iterator())
    assert image.shape == (3, 3, 4, 4) and image.dtype == spora.float32


def test_a_corrupt_image_names_its_file(tmp_path):
    pics = image_tree(tmp_path)
    jpg = next(p for p in pics if p.endswith(".jpg"))
    data = open(jpg, "rb").read()
    open(jpg, "wb").write(data[:len(data) // 2])  # cut off mid-scan
    with pytest.raises(spora.SporaError, match=rf"decode\] {jpg}: corrupt JPEG image"):
        list(ds.ImageFolderDataset(str(tmp_path), extensions=[".jpg"], decode=True))
    with pytest.raises(spora.SporaError, match="corrupt JPEG image") as info:
        list(ds.ImageFolderDataset(str(tmp_path), extensions=[".jpg"]).map(vision.Decode(), "image"))
    assert f"(file {jpg})" in "".join(traceback.format_exception(info.value))
    png = next(p for p in pics if p.endswith(".png"))
    data = bytearray(open(png, "rb").read())
    data[40:60] = bytes(20)  # garbled compressed data (CRC and zlib checks fail)
    open(png, "wb").write(bytes(data))
    with pytest.raises(spora.SporaError, match=rf"decode\] {png}: corrupt PNG image"):
        list(ds.ImageFolderDataset(str(tmp_path), extensions=[".png"], decode=True, shuffle=False))
    with pytest.raises(spora.SporaError, match=r"notes.txt: not a JPEG or PNG image \(first bytes 6e 6f 74"):
        list(ds.ImageFolderDataset(str(tmp_path), extensions=[".txt"], decode=True))
    with pytest.raises(ValueError, match="expects the encoded image as 1-D uint8 bytes"):
        vision.Decode()(np.zeros((2, 2), np.uint8))


# -- text ------------------------------------------------------------------------------------


def test_text_tokenize_vocab_lookup():
    from spora.dataset import text
    d = GeneratorDataset(["Welcome to Beijing", "to Beijing and back"], "text", shuffle=False)
    tok = d.map(text.PythonTokenizer(lambda s: s.split()))
    (first,), (second,) = rows(tok)
    assert first.tolist() == ["Welcome", "to", "Beijing"] and second.tolist() == ["to", "Beijing", "and", "back"]
    # a Tensor iterator gives a string column as NumPy str with MindSpore's asnumpy()
    (words,) = next(tok.create_tuple_iterator())
    assert isinstance(words, np.ndarray) and words.shape == (3,) and words.dtype.kind == "U"
    assert type(words.asnumpy()) is np.ndarray and words.asnumpy().tolist() == ["Welcome", "to", "Beijing"]
    assert [list(r["text"]) for r in tok.create_dict_iterator()][1] == ["to", "Beijing", "and", "back"]
    vocab = text.Vocab.from_dataset(tok)
    # most frequent first, ties in code-point order
    assert vocab.vocab() == {"Beijing": 0, "to": 1, "Welcome": 2, "and": 3, "back": 4}
    ids = tok.map(text.Lookup(vocab))
    (a,), (b,) = [tuple(r) for r in ids]
    assert a.dtype == spora.int32 and a.asnumpy().tolist() == [2, 1, 0] and b.asnumpy().tolist() == [1, 0, 3, 4]
    small = text.Vocab.from_list(["a", "b"], special_tokens=["<pad>", "<unk>"])
    assert small.vocab() == {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3}
    assert text.Lookup(small, "<unk>")(np.array(["b", "zzz"])).tolist() == [3, 1]
    with pytest.raises(KeyError, match="'zzz' is not in the vocabulary and no unknown_token"):
        text.Lookup(small)(np.array(["zzz"]))
    assert text.Vocab.from_dataset(tok, top_k=2, special_tokens=["<unk>"]).vocab() == \
        {"<unk>": 0, "Beijing": 1, "to": 2}
    assert text.WhitespaceTokenizer()("a  b\tc").tolist() == ["a", "b", "c"]
    assert text.BasicTokenizer(lower_case=True)("Héllo, World!").tolist() == ["hello", ",", "world", "!"]
    assert small.tokens_to_ids(["a", "q"]) == [2, -1] and small.ids_to_tokens([3, 0]) == ["b", "<pad>"]


def test_python_pipelines_stop_cleanly_and_report_source_errors():
    import threading
    before = threading.active_count()
    d = GeneratorDataset(list(range(1000)), "v", shuffle=False).map(lambda v: v + 1, num_parallel_workers=3).batch(10)
    for k, _ in enumerate(d):
        if k == 2:
            break  # the producer and workers wind down
    # The producer must end (within 10 s, for a loaded machine); idle worker
    # threads may linger until they see the stop, so the count is only
    # bounded. Waiting for the count alone raced the producer's last steps.
    def producer_alive():
        return any(t.name == "spora-dataset-prefetch" for t in threading.enumerate())
    deadline = time.monotonic() + 10
    while producer_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not producer_alive()
    assert threading.active_count() <= before + 3

    class Broken:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            if i == 2:
                raise IndexError("broken sample")
            return np.float32(i)

    got = []
    with pytest.raises(IndexError, match="broken sample"):
        for (v,) in GeneratorDataset(Broken(), "v", shuffle=False):
            got.append(float(v))
    assert got == [0.0, 1.0]
    with pytest.raises(ValueError, match=r"SequentialSampler\] start_index 9 is outside"):
        list(GeneratorDataset(list(range(3)), "v", sampler=ds.SequentialSampler(start_index=9)))


def test_only_the_columns_read_become_tensors():
    d = GeneratorDataset([(np.int16(7), 1), (np.int16(8), 2)], ["small", "id"], shuffle=False)
    assert [int(i) for (i,) in d.create_tuple_iterator(columns=["id"])] == [1, 2]
    with pytest.raises(TypeError, match="column 'small' is int16"):
        list(d.create_tuple_iterator())


def test_output_shapes_types_and_batch_size():
    d = ds.NumpySlicesDataset({"x": np.zeros((10, 3, 2), np.float32), "y": np.arange(10, dtype=np.int32)})
    b = d.map(lambda x: x[0], "x").batch(4)
    assert b.output_shapes() == [[4, 2], [4]] and b.output_types() == [np.float32, np.int32]
    assert d.output_shapes() == [[3, 2], []] and d.get_batch_size() == 1
    assert b.get_batch_size() == 4 and d.batch(5).map(lambda x: x, "x").get_batch_size() == 5
    assert [int(r[1][0]) for r in b] == [0, 4, 8]  # peeking did not use up an epoch number: same order
