"""A string column's value in a Tensor iterator.

MindSpore's iterators give a text column as a Tensor of dtype String. Spora
Tensors hold numbers only, so the iterator gives a NumPy str array instead:
the same values and shape, printed as NumPy prints them, with MindSpore's
`asnumpy()` so code written for MindSpore's string Tensors runs unchanged.
"""
import numpy as np


class StringArray(np.ndarray):
    """NumPy str array with Tensor.asnumpy() (a plain ndarray view)."""

    def asnumpy(self):
        return self.view(np.ndarray)


def string_array(a):
    """`a` (NumPy, dtype kind 'U' or 'S') as a StringArray, sharing its memory
    when it is contiguous."""
    return np.ascontiguousarray(a).view(StringArray)
