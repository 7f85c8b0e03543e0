"""Text transforms (mindspore.dataset.text): tokenizers, a vocabulary and
the lookup from tokens to ids.

Strings travel through the pipeline as NumPy string arrays; spora Tensors
hold no strings, so iterate a dataset of tokens with output_numpy=True, or
map Lookup first (ids are int32 Tensors).

    ds = GeneratorDataset(["Welcome to Beijing"], "text")
    ds = ds.map(text.WhitespaceTokenizer())          # ['Welcome', 'to', 'Beijing']
    vocab = text.Vocab.from_dataset(ds)               # {'Beijing': 0, 'Welcome': 1, 'to': 2}
    ds = ds.map(text.Lookup(vocab))                   # [1, 2, 0] int32
"""
import collections
import re
import unicodedata

import numpy as np


def _string(x, who):
    if isinstance(x, np.ndarray):
        if x.ndim != 0 or x.dtype.kind not in "US":
            raise TypeError(f"[dataset {who}] expects one string per row, got {x.dtype} {x.shape}")
        x = x.item()
    if isinstance(x, bytes):
        x = x.decode("utf-8")
    if not isinstance(x, str):
        raise TypeError(f"[dataset {who}] expects a string, got {type(x).__name__}")
    return x


def _tokens(tokens):
    return np.array(list(tokens), dtype=str) if tokens else np.array([], dtype="<U1")


class PythonTokenizer:
    """Runs `tokenizer` (str -> list of str) on each row's string."""

    def __init__(self, tokenizer):
        if not callable(tokenizer):
            raise TypeError("[dataset PythonTokenizer] tokenizer must be callable")
        self.tokenizer = tokenizer

    def __call__(self, x):
        return _tokens(self.tokenizer(_string(x, "PythonTokenizer")))


class WhitespaceTokenizer:
    """Splits on Unicode whitespace. with_offsets is not supported."""

    def __init__(self, with_offsets=False):
        if with_offsets:
            raise ValueError("[dataset WhitespaceTokenizer] with_offsets=True is not supported")

    def __call__(self, x):
        return _tokens(_string(x, "WhitespaceTokenizer").split())


class BasicTokenizer:
    """Splits on whitespace and around punctuation (each punctuation mark a
    token); lower_case also lower-cases and strips accents (NFD, combining
    marks dropped), as BERT's basic tokenizer."""

    def __init__(self, lower_case=False, keep_whitespace=False, normalization_form=None,
                 preserve_unused_token=True, with_offsets=False):
        if keep_whitespace or with_offsets or normalization_form not in (None, "none"):
            raise ValueError("[dataset BasicTokenizer] keep_whitespace, normalization_form and with_offsets are "
                             "not supported")
        self.lower_case = bool(lower_case)

    def __call__(self, x):
        s = _string(x, "BasicTokenizer")
        if self.lower_case:
            s = "".join(c for c in unicodedata.normalize("NFD", s.lower()) if unicodedata.category(c) != "Mn")
        out = []
        for word in s.split():
            out += [t for t in re.split(r"(\W)", word) if t]
        return _tokens(out)


class Vocab:
    """Tokens and their ids."""

    def __init__(self, word_to_id):
        self._ids = dict(word_to_id)
        self._words = {i: w for w, i in self._ids.items()}

    @classmethod
    def from_list(cls, word_list, special_tokens=None, special_first=True):
        """Ids in list order; special_tokens before (special_first) or after."""
        words = list(word_list)
        specials = list(special_tokens or [])
        seen = set()
        for w in words + specials:
            if w in seen:
                raise ValueError(f"[dataset Vocab] {w!r} appears twice")
            seen.add(w)
        order = specials + words if special_first else words + specials
        return cls({w: i for i, w in enumerate(order)})

    @classmethod
    def from_dict(cls, word_dict):
        ids = dict(word_dict)
        if len(set(ids.values())) != len(ids):
            raise ValueError("[dataset Vocab] from_dict: two words share an id")
        return cls(ids)

    @classmethod
    def from_dataset(cls, dataset, columns=None, freq_range=None, top_k=None, special_tokens=None,
                     special_first=True):
        """The tokens of `columns` (default: every column) of one pass over
        `dataset`, most frequent first (ties in code-point order), keeping
        those with a count in freq_range = (min, max) and then the top_k."""
        names = dataset.get_col_names()
        cols = [columns] if isinstance(columns, str) else list(columns or names)
        for c in cols:
            if c not in names:
                raise ValueError(f"[dataset Vocab] no column {c!r} (columns: {', '.join(names)})")
        pick = [names.index(c) for c in cols]
        counts = collections.Counter()
        for row in dataset.create_tuple_iterator(output_numpy=True):
            for i in pick:
                v = row[i]
                if v.dtype.kind not in "US":
                    raise TypeError(f"[dataset Vocab] column {names[i]!r} is {v.dtype}, not strings (tokenize it "
                                    "first)")
                counts.update(v.reshape(-1).tolist())
        lo, hi = (None, None) if freq_range is None else freq_range
        words = [w for w, n in counts.items() if (lo is None or n >= lo) and (hi is None or n <= hi)]
        words.sort(key=lambda w: (-counts[w], w))
        if top_k is not None:
            words = words[:int(top_k)]
        specials = [s for s in (special_tokens or [])]
        words = [w for w in words if w not in specials]
        return cls.from_list(words, specials, special_first)

    def vocab(self):
        """{token: id}."""
        return dict(self._ids)

    def tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._ids.get(tokens, -1)
        return [self._ids.get(t, -1) for t in tokens]

    def ids_to_tokens(self, ids):
        if isinstance(ids, (int, np.integer)):
            return self._words.get(int(ids), "")
        return [self._words.get(int(i), "") for i in ids]

    def __len__(self):
        return len(self._ids)


class Lookup:
    """Tokens -> ids of `vocab` (int32, or data_type). A token not in the
    vocabulary maps to unknown_token's id; without unknown_token it is an
    error naming the token."""

    def __init__(self, vocab, unknown_token=None, data_type=None):
        if not isinstance(vocab, Vocab):
            raise TypeError("[dataset Lookup] vocab must be a text.Vocab")
        self.vocab = vocab
        self.unknown = None
        if unknown_token is not None:
            if unknown_token not in vocab._ids:
                raise ValueError(f"[dataset Lookup] unknown_token {unknown_token!r} is not in the vocabulary")
            self.unknown = vocab._ids[unknown_token]
        from .._dtype import dtype_code, from_code, to_numpy_dtype
        self.dtype = np.int32 if data_type is None else to_numpy_dtype(from_code(dtype_code(data_type)))

    def __call__(self, tokens):
        a = np.asarray(tokens)
        if a.dtype.kind not in "US":
            raise TypeError(f"[dataset Lookup] expects string tokens, got {a.dtype}")
        ids = self.vocab._ids
        out = []
        for t in a.reshape(-1).tolist():
            i = ids.get(t, self.unknown)
            if i is None:
                raise KeyError(f"[dataset Lookup] {t!r} is not in the vocabulary and no unknown_token was given")
            out.append(i)
        return np.array(out, dtype=self.dtype).reshape(a.shape)


__all__ = ["PythonTokenizer", "WhitespaceTokenizer", "BasicTokenizer", "Vocab", "Lookup"]
