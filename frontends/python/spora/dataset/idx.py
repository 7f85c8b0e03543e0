"""Readers for the IDX format that MNIST and Fashion-MNIST ship in.

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number
of dimensions), one big-endian uint32 per dimension, then the raw values in C
order. Files may be gzip-compressed (Debian's dataset-fashion-mnist ships
them as .gz). Everything is validated before the data is trusted: a short,
truncated or mislabelled file raises ValueError naming the file.
"""
import gzip
import os

import numpy as np

# type code -> big-endian numpy dtype, as the IDX format defines them
_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

# An honest IDX file of a real dataset is far below this; the cap keeps a
# corrupted header from asking for a huge allocation.
_MAX_ELEMENTS = 1 << 34


def _open(path):
    with open(path, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_idx(path):
    """Read one IDX file (plain or gzip) into a numpy array of its own type.

    Raises FileNotFoundError for a missing file and ValueError for a file that
    is not IDX, has an unknown type code, or holds fewer bytes than its header
    promises (a truncated download or a cut-off gzip stream).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"[dataset] {path}: no such file")
    try:
        with _open(path) as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # gzip raises these for a cut-off stream
        raise ValueError(f"[dataset] {path}: cannot read: {e}") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"[dataset] {path}: not an IDX file (bad magic number)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_TYPES:
        raise ValueError(f"[dataset] {path}: unknown IDX type code 0x{code:02x}")
    if ndim == 0 or len(raw) < 4 + 4 * ndim:
        raise ValueError(f"[dataset] {path}: IDX header is truncated")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    count = int(np.prod(dims, dtype=np.int64))
    if count > _MAX_ELEMENTS:
        raise ValueError(f"[dataset] {path}: IDX header claims {count} elements")
    dtype = _IDX_TYPES[code]
    offset = 4 + 4 * ndim
    need = count * dtype.itemsize
    if len(raw) - offset < need:
        raise ValueError(f"[dataset] {path}: truncated: header promises {need} data bytes, "
                         f"file has {len(raw) - offset}")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=offset).reshape(dims)
    return data.astype(dtype.newbyteorder("="), copy=True)
