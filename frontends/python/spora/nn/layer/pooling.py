"""MaxPool2d and AvgPool2d (NCHW)."""
import math

from ...ops import raw
from .. import _util
from ..cell import Cell


class _Pool2d(Cell):
    """kernel_size; stride (default: kernel_size, as in PyTorch); pad_mode
    'valid' (default), 'same' (output = ceil(input / stride), padding split
    with the odd one at the end) or 'pad' with an explicit `padding`."""

    _op = None

    def __init__(self, kernel_size=1, stride=None, pad_mode="valid", padding=0, ceil_mode=False):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _util.pair(kernel_size, "kernel_size", name)
        self.stride = _util.pair(stride if stride is not None else kernel_size, "stride", name)
        if min(self.kernel_size) <= 0 or min(self.stride) <= 0:
            raise ValueError(f"[{name}] kernel_size and stride must be positive")
        if pad_mode not in ("valid", "same", "pad"):
            raise ValueError(f"[{name}] pad_mode must be 'valid', 'same' or 'pad', got {pad_mode!r}")
        if pad_mode != "pad" and padding:
            raise ValueError(f"[{name}] padding needs pad_mode 'pad'")
        self.pad_mode = pad_mode
        self.padding = _util.pair(padding, "padding", name)
        self.ceil_mode = bool(ceil_mode)

    def _pads(self, x):
        name = type(self).__name__
        if len(x.shape) != 4:
            raise ValueError(f"[{name}] expects input (N, C, H, W), got shape {tuple(x.shape)}"
                             f"{_util._C_location()}")
        if self.pad_mode == "valid":
            return [0, 0, 0, 0]
        if self.pad_mode == "pad":
            return [self.padding[0], self.padding[0], self.padding[1], self.padding[1]]
        pads = []
        for size, k, s in zip(x.shape[2:], self.kernel_size, self.stride):
            out = math.ceil(size / s)
            total = max((out - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        return pads

    def extend_repr(self):
        return (f"kernel_size={tuple(self.kernel_size)}, stride={tuple(self.stride)}, "
                f"pad_mode={self.pad_mode}")


class MaxPool2d(_Pool2d):
    def construct(self, x):
        return raw.max_pool2d(x, kernel_size=self.kernel_size, stride=self.stride, padding=self._pads(x),
                              ceil_mode=self.ceil_mode)


class AvgPool2d(_Pool2d):
    """Average over each window; padding taps count in the divisor only with
    count_include_pad (PyTorch's default True)."""

    def __init__(self, kernel_size=1, stride=None, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, pad_mode, padding, ceil_mode)
        self.count_include_pad = bool(count_include_pad)

    def construct(self, x):
        return raw.avg_pool2d(x, kernel_size=self.kernel_size, stride=self.stride, padding=self._pads(x),
                              ceil_mode=self.ceil_mode, count_include_pad=self.count_include_pad)
