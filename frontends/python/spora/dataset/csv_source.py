"""CSVDataset: rows of CSV files (mindspore.dataset.CSVDataset).

Each field is one column of scalars. column_defaults gives each column's
type by its default's Python type (int -> int64, float -> float32, str ->
string), and the value an empty field takes; without it every column is a
string, as in MindSpore. column_names defaults to the first line of the
first file (each file's first line is then its header). The files are read
and checked when the dataset is made: a row with the wrong number of fields
or a value that does not parse is an error naming the file and line.
"""
import csv
import enum
import glob
import os

import numpy as np

from . import config
from .engine import Dataset
from .generator import _GeneratorSource


class Shuffle(str, enum.Enum):
    """shuffle= of the file sources: GLOBAL (every row), FILES (the order of
    the files only)."""
    GLOBAL = "global"
    FILES = "files"
    INFILE = "infile"


def _paths(dataset_files, who):
    files = [dataset_files] if isinstance(dataset_files, (str, os.PathLike)) else list(dataset_files)
    out = []
    for f in files:
        f = os.fspath(f)
        hits = sorted(glob.glob(f)) if any(c in f for c in "*?[") else [f]
        if not hits or not all(os.path.isfile(h) for h in hits):
            raise FileNotFoundError(f"[{who}] {f}: no such file")
        out += hits
    if not out:
        raise ValueError(f"[{who}] no files given")
    return out


def _parser(default, who):
    if isinstance(default, bool):
        raise TypeError(f"[{who}] column_defaults: bool is not a CSV column type (int, float or str)")
    if isinstance(default, int):
        return int, np.int64
    if isinstance(default, float):
        return float, np.float32
    if isinstance(default, str):
        return str, None
    raise TypeError(f"[{who}] column_defaults must be int, float or str values, got {type(default).__name__}")


class CSVDataset(Dataset):
    """Rows of CSV files. dataset_files: a path, a glob pattern, or a list of
    them. field_delim: the separator. shuffle: True / Shuffle.GLOBAL (the
    default, as MindSpore), Shuffle.FILES (file order only) or False.
    num_samples, num_shards/shard_id as for the other sources."""

    def __init__(self, dataset_files, field_delim=",", column_defaults=None, column_names=None, num_samples=None,
                 num_parallel_workers=None, shuffle=Shuffle.GLOBAL, num_shards=None, shard_id=None, cache=None):
        who = "CSVDataset"
        if cache is not None:
            raise TypeError(f"[{who}] cache is not supported")
        if shuffle == Shuffle.INFILE:
            raise ValueError(f"[{who}] Shuffle.INFILE is not supported; use Shuffle.GLOBAL or Shuffle.FILES")
        if not isinstance(field_delim, str) or len(field_delim) != 1:
            raise ValueError(f"[{who}] field_delim must be one character, got {field_delim!r}")
        files = _paths(dataset_files, who)
        names = list(column_names) if column_names is not None else None
        if shuffle == Shuffle.FILES:
            files = [files[i] for i in np.random.default_rng([config.get_seed(), 0x4653]).permutation(len(files))]
        records = []
        for path in files:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.reader(f, delimiter=field_delim)
                for line, fields in enumerate(reader, 1):
                    if names is None:
                        names = fields
                        continue
                    if line == 1 and column_names is None:
                        continue  # every file's header
                    if not fields:
                        continue
                    records.append((path, line, fields))
        if not names:
            raise ValueError(f"[{who}] {files[0]}: no header line and no column_names")
        parsers = [(str, None)] * len(names)
        defaults = [""] * len(names)
        if column_defaults is not None:
            if len(column_defaults) != len(names):
                raise ValueError(f"[{who}] {len(column_defaults)} column_defaults for {len(names)} columns "
                                 f"({', '.join(names)})")
            parsers = [_parser(d, who) for d in column_defaults]
            defaults = list(column_defaults)
        rows = []
        for path, line, fields in records:
            if len(fields) != len(names):
                raise ValueError(f"[{who}] {path}, line {line}: {len(fields)} fields, expected {len(names)} "
                                 f"({', '.join(names)})")
            row = []
            for k, (text, (parse, dtype), dflt) in enumerate(zip(fields, parsers, defaults)):
                if text == "":
                    v = dflt
                else:
                    try:
                        v = parse(text)
                    except ValueError:
                        raise ValueError(f"[{who}] {path}, line {line}, column '{names[k]}': {text!r} is not "
                                         f"{'an int' if parse is int else 'a float'} (the column's default is "
                                         f"{dflt!r})") from None
                row.append(np.array(v, dtype=dtype) if dtype is not None else np.array(v))
            rows.append(tuple(row))
        if (num_shards is None) != (shard_id is None):
            raise ValueError(f"[{who}] num_shards and shard_id go together")
        shards = 1 if num_shards is None else int(num_shards)
        shard = 0 if shard_id is None else int(shard_id)
        if shards < 1 or not 0 <= shard < shards:
            raise ValueError(f"[{who}] shard_id {shard} is not in [0, {shards}) (num_shards={shards})")
        node = _GeneratorSource(rows, names, None, True, None, shuffle is True or shuffle == Shuffle.GLOBAL,
                                config.get_seed(), int(num_samples) if num_samples else None, shards, shard, 1,
                                False)
        super().__init__(None, None, node)
        self.dataset_files = files


__all__ = ["CSVDataset", "Shuffle"]
