"""ImageFolderDataset: one class per subdirectory
(mindspore.dataset.ImageFolderDataset).

dataset_dir/<class name>/<image file>: classes are the subdirectories in
sorted order (label = position) unless class_indexing maps names to labels.
Columns: "image", the file's bytes (1-D uint8; map vision.Decode() to get
HWC RGB) or, with decode=True, the decoded image; "label" int32
(MindSpore's is uint32, a type spora lacks). JPEG and PNG decode through
libjpeg-turbo / libpng; a corrupt file is an error naming it.
"""
import os

import numpy as np

from .. import _C
from . import config
from .engine import Dataset
from .generator import _GeneratorSource
from .samplers import as_sampler


def decode(data, name="image"):
    """Encoded JPEG/PNG bytes (bytes or a 1-D uint8 array) -> HWC uint8 RGB."""
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    return _C.decode_image(raw, name).asnumpy()


class _ImageFiles:
    """Random access over (path, label) pairs, read (and decoded) per row."""

    def __init__(self, files, decode_images):
        self.files, self.decode = files, decode_images

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path, label = self.files[i]
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise OSError(f"[ImageFolderDataset] {path}: cannot read: {e.strerror}") from None
        image = decode(raw, path) if self.decode else np.frombuffer(raw, dtype=np.uint8).copy()
        return image, np.int32(label)

    def describe(self, i):
        return f"file {self.files[i][0]}"


class ImageFolderDataset(Dataset):
    """Images in class subdirectories. extensions: the file suffixes to take
    (e.g. [".jpg", ".png"], case as written; default: every file).
    class_indexing: {class name: label} (only those classes). decode: decode
    in the source. shuffle (default True), sampler, num_samples,
    num_shards/shard_id as for GeneratorDataset; files are read on
    num_parallel_workers threads."""

    def __init__(self, dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                 extensions=None, class_indexing=None, decode=False, num_shards=None, shard_id=None, cache=None,
                 decrypt=None, seed=None):
        who = "ImageFolderDataset"
        if cache is not None or decrypt is not None:
            raise TypeError(f"[{who}] cache and decrypt are not supported")
        dataset_dir = os.fspath(dataset_dir)
        if not os.path.isdir(dataset_dir):
            raise FileNotFoundError(f"[{who}] {dataset_dir}: no such directory")
        classes = sorted(e.name for e in os.scandir(dataset_dir) if e.is_dir())
        if class_indexing is not None:
            missing = [c for c in class_indexing if c not in classes]
            if missing:
                raise ValueError(f"[{who}] class_indexing names {missing}, not subdirectories of {dataset_dir} "
                                 f"({', '.join(classes)})")
            index = {c: int(v) for c, v in class_indexing.items()}
        else:
            index = {c: i for i, c in enumerate(classes)}
        exts = None if extensions is None else tuple(extensions)
        files = []
        for c in sorted(index):
            folder = os.path.join(dataset_dir, c)
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                if os.path.isfile(path) and (exts is None or name.endswith(exts)):
                    files.append((path, index[c]))
        if not files:
            raise ValueError(f"[{who}] no image files under {dataset_dir} (classes: {', '.join(classes) or 'none'}"
                             f"{'; extensions ' + ', '.join(exts) if exts else ''})")
        if (num_shards is None) != (shard_id is None):
            raise ValueError(f"[{who}] num_shards and shard_id go together")
        shards = 1 if num_shards is None else int(num_shards)
        shard = 0 if shard_id is None else int(shard_id)
        if shards < 1 or not 0 <= shard < shards:
            raise ValueError(f"[{who}] shard_id {shard} is not in [0, {shards}) (num_shards={shards})")
        sampler = as_sampler(sampler)
        if sampler is not None and (shuffle is not None or shards > 1):
            raise ValueError(f"[{who}] pass either sampler or shuffle/num_shards/shard_id, not both")
        workers = config.get_num_parallel_workers() if num_parallel_workers is None else int(num_parallel_workers)
        node = _GeneratorSource(_ImageFiles(files, bool(decode)), ["image", "label"], None, True, sampler,
                                True if shuffle is None else bool(shuffle),
                                config.get_seed() if seed is None else int(seed),
                                int(num_samples) if num_samples else None, shards, shard, workers, False)
        super().__init__(None, None, node)
        self.class_indexing = index
        self.files = [p for p, _ in files]

    def get_class_indexing(self):
        return dict(self.class_indexing)


__all__ = ["ImageFolderDataset"]
