"""Image transforms for Dataset.map (mindspore.dataset.vision).

Images are HWC (channels last) or HW (one channel), as the sources give
them; HWC2CHW makes them CHW for conv layers. Random transforms draw from
the pipeline's Philox generator keyed by (seed, epoch, sample), so results
do not depend on num_parallel_workers.
"""
from .transforms import Transform


def _pair(v, what):
    if isinstance(v, int):
        return [v, v]
    v = [int(x) for x in v]
    if len(v) != 2:
        raise ValueError(f"[dataset {what}] expected an int or (height, width), got {v}")
    return v


class Rescale(Transform):
    """x * rescale + shift, as float32."""

    _name = "rescale"

    def __init__(self, rescale, shift):
        super().__init__()
        self.rescale, self.shift = float(rescale), float(shift)
        self._attrs.set_float("rescale", self.rescale)
        self._attrs.set_float("shift", self.shift)


class Normalize(Transform):
    """(x - mean[c]) / std[c] per channel c, as float32 (mean/std in the
    image's own scale, e.g. 0..255 for uint8 images)."""

    _name = "normalize"

    def __init__(self, mean, std, is_hwc=True):
        super().__init__()
        mean = [float(m) for m in (mean if hasattr(mean, "__len__") else [mean])]
        std = [float(s) for s in (std if hasattr(std, "__len__") else [std])]
        self.mean, self.std, self.is_hwc = mean, std, bool(is_hwc)
        self._attrs.set_floats("mean", mean)
        self._attrs.set_floats("std", std)
        self._attrs.set_bool("is_hwc", self.is_hwc)


class HWC2CHW(Transform):
    """(H, W, C) -> (C, H, W); (H, W) -> (1, H, W)."""

    _name = "hwc2chw"


class RandomHorizontalFlip(Transform):
    """Mirrors the image left-right with probability prob."""

    _name = "random_horizontal_flip"

    def __init__(self, prob=0.5):
        super().__init__()
        self.prob = float(prob)
        self._attrs.set_float("prob", self.prob)


class RandomCrop(Transform):
    """Pads the image (padding: p, (left/right, top/bottom) or (left, top,
    right, bottom); fill_value for the border) and crops a random
    size = (h, w) window."""

    _name = "random_crop"

    def __init__(self, size, padding=None, fill_value=0):
        super().__init__()
        self.size = _pair(size, "RandomCrop")
        if padding is None:
            padding = []
        elif isinstance(padding, int):
            padding = [padding]
        else:
            padding = [int(p) for p in padding]
        self.padding, self.fill_value = padding, int(fill_value)
        self._attrs.set_ints("size", self.size)
        if padding:
            self._attrs.set_ints("padding", padding)
        self._attrs.set_int("fill_value", self.fill_value)


__all__ = ["Rescale", "Normalize", "HWC2CHW", "RandomHorizontalFlip", "RandomCrop"]
