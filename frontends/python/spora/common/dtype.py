"""MindSpore's mindspore.common.dtype (`import mindspore.common.dtype as
mstype`): Spora's element types under MindSpore's names. Spora has no
int8, int16, uint16-64, complex or string types; those names are absent."""
from .._dtype import DType, bfloat16, bool_, float16, float32, float64, int32, int64, uint8  # noqa: F401

half = float16
single = float32
double = float64

__all__ = ["DType", "bfloat16", "bool_", "float16", "float32", "float64", "int32", "int64", "uint8",
           "half", "single", "double"]
