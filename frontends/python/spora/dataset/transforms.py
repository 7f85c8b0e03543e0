"""General transforms (mindspore.dataset.transforms).

A built-in transform runs two ways, with the same result:
- inside Dataset.map on a pipeline of built-ins only, in the C++ workers
  (never under the GIL);
- called on one sample, `TypeCast(np.int32)(label)`, or inside a map that
  also runs Python functions: a NumPy implementation of the same arithmetic.

Compose([...]) chains transforms and Python callables; in map() a Compose
of built-ins only still runs in C++.
"""
import numpy as np

from .. import _C
from .._dtype import dtype_code, from_code, to_numpy_dtype

_rng = np.random.default_rng()


def _as_numpy(x, who):
    """One sample as a NumPy array (arrays, Tensors, PIL images, numbers)."""
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    try:
        return np.asarray(x)
    except Exception as e:  # noqa: BLE001 - any unconvertible object
        raise TypeError(f"[dataset {who}] cannot take a {type(x).__name__} as an image or array: {e}") from None


class Transform:
    """A built-in transform: a name and attributes for spora_transform_create,
    and `_apply(array, rng)`, the NumPy implementation used when it is called
    directly or inside a map that runs Python code."""

    _name = None
    _random = False

    def __init__(self):
        self._attrs = _C.Attrs()

    def _handle(self):
        return _C.DataTransform(self._name, self._attrs)

    def _apply(self, x, rng):
        raise NotImplementedError

    def __call__(self, *samples):
        """Applies the transform to one sample (several: each separately, as
        map does with several input columns)."""
        if not samples:
            raise TypeError(f"[dataset {type(self).__name__}] needs a sample to transform")
        out = tuple(self._apply(_as_numpy(s, type(self).__name__), _rng) for s in samples)
        return out[0] if len(out) == 1 else out

    def __repr__(self):
        return f"{type(self).__name__}()"


class TypeCast(Transform):
    """Casts to `data_type` (a spora or NumPy dtype or a name: spora.float32,
    np.int32, "float32"); float to integer truncates toward zero."""

    _name = "type_cast"

    def __init__(self, data_type):
        super().__init__()
        self.data_type = from_code(dtype_code(data_type))
        if self.data_type.short in ("f16", "bf16"):
            raise TypeError(f"[dataset TypeCast] {self.data_type.name} is not supported in the data pipeline; "
                            "cast to float32 here and to float16 in the network (or use spora.amp)")
        self._attrs.set_string("dtype", self.data_type.short)

    def _apply(self, x, rng):
        want = to_numpy_dtype(self.data_type)
        if want == np.bool_:
            return x != 0
        if np.issubdtype(x.dtype, np.floating) and not np.issubdtype(want, np.floating):
            info = np.iinfo(want)  # clamp as the C++ cast does (NaN -> 0)
            x = np.nan_to_num(x, nan=0.0, posinf=info.max, neginf=info.min)
            x = np.clip(x, info.min, info.max)
        return np.asarray(x).astype(want)


class OneHot(Transform):
    """A scalar integer label -> a (num_classes,) vector of the label's dtype."""

    _name = "one_hot"

    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = int(num_classes)
        if self.num_classes < 1:
            raise ValueError(f"[dataset OneHot] num_classes must be >= 1, got {num_classes}")
        self._attrs.set_int("num_classes", self.num_classes)

    def _apply(self, x, rng):
        if x.size != 1:
            raise ValueError(f"[dataset one_hot] expects a scalar label, got shape {x.shape}")
        if not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"[dataset one_hot] expects an integer label, got {x.dtype}")
        label = int(x.reshape(()))
        if not 0 <= label < self.num_classes:
            raise ValueError(f"[dataset one_hot] label {label} is outside [0, {self.num_classes})")
        out = np.zeros(self.num_classes, dtype=x.dtype)
        out[label] = 1
        return out


class Compose:
    """Runs `transforms` (built-ins and Python callables) in order, each on
    the previous one's output, as one map operation or on one sample."""

    def __init__(self, transforms):
        if not isinstance(transforms, (list, tuple)) or not transforms:
            raise ValueError("[dataset Compose] expects a non-empty list of transforms")
        for t in transforms:
            if not callable(t):
                raise TypeError(f"[dataset Compose] {t!r} is not a transform or a callable")
        self.transforms = list(transforms)

    def __call__(self, *samples):
        out = samples
        for t in self.transforms:
            out = t(*out)
            out = out if isinstance(out, tuple) else (out,)
        return out[0] if len(out) == 1 else out

    def __repr__(self):
        return f"Compose({self.transforms!r})"


__all__ = ["Transform", "TypeCast", "OneHot", "Compose"]
