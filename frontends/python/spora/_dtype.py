"""Spora's dtypes: spora.float32, ..., comparable with NumPy dtypes."""
import numpy as np

__all__ = ["DType", "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool_",
           "dtype_code", "to_numpy_dtype"]


class DType:
    """An element type. ``name`` is the NumPy-style name ("float32");
    ``code`` is the spora_dtype_t value; ``short`` is the C API name ("f32")."""

    __slots__ = ("name", "code", "short", "itemsize", "_np", "is_floating_point")

    def __init__(self, name, code, short, itemsize, np_dtype, is_float):
        self.name = name
        self.code = code
        self.short = short
        self.itemsize = itemsize
        self._np = np_dtype
        self.is_floating_point = is_float

    def __repr__(self):
        return f"spora.{self.name}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        try:
            return dtype_code(other) == self.code
        except (TypeError, ValueError):
            return False

    def __hash__(self):
        return hash(("spora.dtype", self.code))

    @property
    def numpy(self):
        """The NumPy dtype (None for bfloat16, which NumPy lacks)."""
        return self._np


float32 = DType("float32", 1, "f32", 4, np.dtype(np.float32), True)
float64 = DType("float64", 2, "f64", 8, np.dtype(np.float64), True)
float16 = DType("float16", 3, "f16", 2, np.dtype(np.float16), True)
bfloat16 = DType("bfloat16", 4, "bf16", 2, None, True)
int32 = DType("int32", 5, "i32", 4, np.dtype(np.int32), False)
int64 = DType("int64", 6, "i64", 8, np.dtype(np.int64), False)
uint8 = DType("uint8", 7, "u8", 1, np.dtype(np.uint8), False)
bool_ = DType("bool", 8, "bool", 1, np.dtype(np.bool_), False)

ALL = [float32, float64, float16, bfloat16, int32, int64, uint8, bool_]
_BY_CODE = [None] + ALL
_BY_NAME = {}
for _d in ALL:
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.short] = _d
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "int": int64, "long": int64,
                 "bool_": bool_, "bf16": bfloat16})
_BY_NP = {d._np: d for d in ALL if d._np is not None}


def dtype_code(obj):
    """The spora_dtype_t value of a spora dtype, NumPy dtype or type, or a
    name ("float32", "f32"). Raises TypeError for anything else."""
    if isinstance(obj, DType):
        return obj.code
    if isinstance(obj, str):
        d = _BY_NAME.get(obj)
        if d is None:
            raise TypeError(f"unknown dtype name {obj!r}; spora dtypes: "
                            + ", ".join(x.name for x in ALL))
        return d.code
    if obj is float:
        return float32.code
    if obj is int:
        return int64.code
    if obj is bool:
        return bool_.code
    try:
        npd = np.dtype(obj)
    except TypeError:
        npd = None
    if npd is not None and npd in _BY_NP:
        return _BY_NP[npd].code
    if npd is not None and npd.name == "bfloat16":  # ml_dtypes
        return bfloat16.code
    raise TypeError(f"dtype {obj!r} is not supported by spora (supported: "
                    + ", ".join(x.name for x in ALL) + ")")


def from_code(code):
    return _BY_CODE[code]


def get(obj):
    """The spora DType for anything dtype_code accepts."""
    return _BY_CODE[dtype_code(obj)]


def to_numpy_dtype(d):
    d = get(d)
    return np.dtype(np.float32) if d is bfloat16 else d._np
