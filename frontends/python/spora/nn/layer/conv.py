"""Conv2d (NCHW input, OIHW weight) and Conv2dTranspose."""
import math

from ... import Parameter
from ...ops import raw
from .. import _util
from ..cell import Cell
from ..init import HeUniform, Uniform, initializer


def _conv_args(cell, op, in_channels, out_channels, kernel_size, stride, pad_mode, padding, dilation, group):
    """Checks and stores the arguments Conv2d and Conv2dTranspose share; returns padding as (top, bottom,
    left, right)."""
    cell.in_channels, cell.out_channels, cell.group = int(in_channels), int(out_channels), int(group)
    if cell.in_channels <= 0 or cell.out_channels <= 0:
        raise ValueError(f"[{op}] channels must be positive, got ({in_channels}, {out_channels})")
    if cell.group <= 0 or cell.in_channels % cell.group or cell.out_channels % cell.group:
        raise ValueError(f"[{op}] group {group} must divide in_channels {in_channels} and "
                         f"out_channels {out_channels}")
    cell.kernel_size = _util.pair(kernel_size, "kernel_size", op)
    cell.stride = _util.pair(stride, "stride", op)
    cell.dilation = _util.pair(dilation, "dilation", op)
    if pad_mode not in ("same", "valid", "pad"):
        raise ValueError(f"[{op}] pad_mode must be 'same', 'valid' or 'pad', got {pad_mode!r}")
    cell.pad_mode = pad_mode
    if isinstance(padding, int):
        padding = [padding] * 4
    padding = [int(p) for p in padding]
    if len(padding) == 2:
        padding = [padding[0], padding[0], padding[1], padding[1]]
    if len(padding) != 4 or any(p < 0 for p in padding):
        raise ValueError(f"[{op}] padding must be a non-negative int, (ph, pw) or "
                         f"(top, bottom, left, right), got {padding}")
    return padding


def _conv_params(cell, shape, has_bias, weight_init, bias_init, dtype):
    """The weight (default HeUniform(sqrt(5))) and optional bias (default U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    fan_in from the weight's dims 1..3), as PyTorch initialises both convolutions."""
    cell.weight = Parameter(initializer(weight_init if weight_init is not None else HeUniform(math.sqrt(5)),
                                        shape, dtype))
    cell.has_bias = has_bias
    if has_bias:
        fan_in = shape[1] * shape[2] * shape[3]
        cell.bias = Parameter(initializer(bias_init if bias_init is not None else Uniform(1 / math.sqrt(fan_in)),
                                          (cell.out_channels,), dtype))



class Conv2d(Cell):
    """2-D convolution, MindSpore's signature and defaults:

    pad_mode 'same' (output = ceil(input / stride); the default), 'valid'
    (no padding) or 'pad' (explicit `padding`: an int, (ph, pw) or
    (top, bottom, left, right)); has_bias False by default. group divides
    both channel counts. Default init as in PyTorch: weight
    HeUniform(sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0,
                 dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None, dtype=None):
        super().__init__()
        padding = _conv_args(self, "Conv2d", in_channels, out_channels, kernel_size, stride, pad_mode, padding,
                             dilation, group)
        if pad_mode != "pad" and any(padding):
            raise ValueError(f"[Conv2d] padding must be 0 unless pad_mode is 'pad' (got {padding} with "
                             f"pad_mode {pad_mode!r})")
        self.padding = padding
        _conv_params(self, (self.out_channels, self.in_channels // self.group, *self.kernel_size), has_bias,
                     weight_init, bias_init, dtype)
        self._attrs = dict(stride=self.stride, dilation=self.dilation, groups=self.group,
                           pad_mode="explicit" if pad_mode == "pad" else pad_mode, padding=padding)

    def construct(self, x):
        if len(x.shape) != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"[Conv2d] expects input (N, {self.in_channels}, H, W), got shape "
                             f"{tuple(x.shape)}{_util._C_location()}")
        if self.has_bias:
            return raw.conv2d_bias(x, self.weight, self.bias, **self._attrs)
        return raw.conv2d(x, self.weight, **self._attrs)

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={tuple(self.kernel_size)}, stride={tuple(self.stride)}, pad_mode={self.pad_mode}, "
                f"padding={tuple(self.padding)}, dilation={tuple(self.dilation)}, group={self.group}, "
                f"has_bias={self.has_bias}")


class Conv2dTranspose(Cell):
    """2-D transposed convolution (the gradient of Conv2d with respect to its
    input), MindSpore's signature and defaults. weight is (in_channels,
    out_channels / group, kH, kW).

    Output height (width alike), k' = dilation * (kernel - 1) + 1:
    pad_mode 'same' (default): H * stride; 'valid': H * stride + max(k' -
    stride, 0); 'pad': (H - 1) * stride - top - bottom + k' +
    output_padding, `padding` an int, (ph, pw) or (top, bottom, left,
    right). 'same' crops the full output evenly, the odd element at the
    bottom / right. Default init as Conv2d's (fan_in from the weight's
    dims 1..3, as PyTorch's ConvTranspose2d).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0,
                 output_padding=0, dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None,
                 dtype=None):
        super().__init__()
        op = "Conv2dTranspose"
        padding = _conv_args(self, op, in_channels, out_channels, kernel_size, stride, pad_mode, padding, dilation,
                             group)
        self.output_padding = _util.pair(output_padding, "output_padding", op)
        if pad_mode != "pad" and (any(padding) or any(self.output_padding)):
            raise ValueError(f"[{op}] padding and output_padding must be 0 unless pad_mode is 'pad' (got "
                             f"{padding} and {self.output_padding} with pad_mode {pad_mode!r})")
        self.padding = padding
        # The crop / extra rows of each mode, fixed by the kernel alone.
        ext = [self.dilation[i] * (self.kernel_size[i] - 1) + 1 for i in range(2)]
        if pad_mode == "pad":
            self._pads, self._out_pad = padding, self.output_padding
        else:
            crop = [max(ext[i] - self.stride[i], 0) if pad_mode == "same" else 0 for i in range(2)]
            self._pads = [crop[0] // 2, crop[0] - crop[0] // 2, crop[1] // 2, crop[1] - crop[1] // 2]
            self._out_pad = [max(self.stride[i] - ext[i], 0) for i in range(2)]
        for i in range(2):
            if self._out_pad[i] >= max(self.stride[i], self.dilation[i]):
                raise ValueError(f"[{op}] output_padding {self._out_pad[i]} must be smaller than stride "
                                 f"{self.stride[i]} or dilation {self.dilation[i]}")
        _conv_params(self, (self.in_channels, self.out_channels // self.group, *self.kernel_size), has_bias,
                     weight_init, bias_init, dtype)

    def construct(self, x):
        if len(x.shape) != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"[Conv2dTranspose] expects input (N, {self.in_channels}, H, W), got shape "
                             f"{tuple(x.shape)}{_util._C_location()}")
        y = raw.conv2d_transpose(x, self.weight, stride=self.stride, padding=self._pads,
                                 output_padding=self._out_pad, dilation=self.dilation, groups=self.group)
        if self.has_bias:
            y = y + self.bias.reshape(1, -1, 1, 1)
        return y

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={tuple(self.kernel_size)}, stride={tuple(self.stride)}, pad_mode={self.pad_mode}, "
                f"padding={tuple(self.padding)}, output_padding={tuple(self.output_padding)}, "
                f"dilation={tuple(self.dilation)}, group={self.group}, has_bias={self.has_bias}")
