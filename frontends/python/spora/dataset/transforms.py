"""General transforms for Dataset.map (mindspore.dataset.transforms): each
runs in the C++ pipeline's workers, never under the GIL."""
from .. import _C
from .._dtype import dtype_code, from_code


class Transform:
    """A built-in transform: a name and attributes for spora_transform_create."""

    _name = None

    def __init__(self):
        self._attrs = _C.Attrs()

    def _handle(self):
        return _C.DataTransform(self._name, self._attrs)

    def __repr__(self):
        return f"{type(self).__name__}()"


class TypeCast(Transform):
    """Casts to `data_type` (a spora or NumPy dtype or a name: spora.float32,
    np.int32, "float32"); float to integer truncates toward zero."""

    _name = "type_cast"

    def __init__(self, data_type):
        super().__init__()
        self.data_type = from_code(dtype_code(data_type))
        self._attrs.set_string("dtype", self.data_type.short)


class OneHot(Transform):
    """A scalar integer label -> a (num_classes,) vector of the label's dtype."""

    _name = "one_hot"

    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = int(num_classes)
        self._attrs.set_int("num_classes", self.num_classes)


__all__ = ["Transform", "TypeCast", "OneHot"]
