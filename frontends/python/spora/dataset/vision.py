"""Image transforms for Dataset.map (mindspore.dataset.vision).

Images are HWC (channels last) or HW (one channel), as the sources give
them; HWC2CHW makes them CHW for conv layers. Random transforms draw from
the pipeline's Philox generator keyed by (seed, epoch, sample), so results
do not depend on num_parallel_workers.

Each is also callable on one image, a NumPy array (or PIL image, Tensor):
`vision.Rescale(1 / 255, 0)(img)`, as in MindSpore 2.x.
"""
import numpy as np

from .transforms import Transform


def _numeric(x, who):
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise TypeError(f"[dataset {who}] expects a numeric image, got dtype {x.dtype}")


def _image(x, who):
    _numeric(x, who)
    if x.ndim not in (2, 3):
        raise ValueError(f"[dataset {who}] expects an HWC or HW image, got shape {x.shape}")


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

    def _apply(self, x, rng):
        _numeric(x, "rescale")
        return x.astype(np.float32) * np.float32(self.rescale) + np.float32(self.shift)


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

    def _apply(self, x, rng):
        _numeric(x, "normalize")
        if x.ndim not in (2, 3):
            raise ValueError(f"[dataset normalize] expects an HWC or HW image, got shape {x.shape}")
        c = 1 if x.ndim == 2 else (x.shape[2] if self.is_hwc else x.shape[0])
        if len(self.mean) not in (1, c):
            raise ValueError(f"[dataset normalize] {len(self.mean)} means for an image of {c} channels "
                             f"(shape {x.shape})")
        # (x - m) / s as x * (1/s) + (-m/s) in float32, as the C++ transform computes it
        a = np.array([1.0 / s for s in self.std], dtype=np.float64).astype(np.float32)
        b = np.array([-m / s for m, s in zip(self.mean, self.std)], dtype=np.float64).astype(np.float32)
        y = x.astype(np.float32)
        if len(a) == 1 or c == 1:
            return y * a[0] + b[0]
        if self.is_hwc:
            return y * a + b
        return y * a[:, None, None] + b[:, None, None]


class HWC2CHW(Transform):
    """(H, W, C) -> (C, H, W); (H, W) -> (1, H, W)."""

    _name = "hwc2chw"

    def _apply(self, x, rng):
        if x.ndim == 2:
            return x[None, :, :].copy()
        if x.ndim != 3:
            raise ValueError(f"[dataset hwc2chw] expects an HWC image, got shape {x.shape}")
        return np.ascontiguousarray(x.transpose(2, 0, 1))


class Decode(Transform):
    """Encoded JPEG or PNG bytes (1-D uint8, as ImageFolderDataset gives
    them) -> an HWC uint8 RGB image (libjpeg-turbo / libpng). A corrupt
    image is an error (in a pipeline, the note names the file). to_pil is
    not supported: Spora's images are NumPy arrays."""

    _name = "decode"

    def __init__(self, to_pil=False):
        super().__init__()
        if to_pil:
            raise ValueError("[dataset Decode] to_pil=True is not supported: images are NumPy arrays "
                             "(PIL.Image.fromarray(img) makes one)")

    def _apply(self, x, rng):
        from .image_folder import decode
        if x.dtype != np.uint8 or x.ndim != 1:
            raise ValueError(f"[dataset decode] expects the encoded image as 1-D uint8 bytes, got {x.dtype} "
                             f"{x.shape}")
        return decode(x)

    def __call__(self, *samples):
        samples = tuple(np.frombuffer(s, np.uint8) if isinstance(s, (bytes, bytearray)) else s for s in samples)
        return super().__call__(*samples)


class RandomHorizontalFlip(Transform):
    """Mirrors the image left-right with probability prob."""

    _name = "random_horizontal_flip"
    _random = True

    def __init__(self, prob=0.5):
        super().__init__()
        self.prob = float(prob)
        self._attrs.set_float("prob", self.prob)
        if not 0 <= self.prob <= 1:
            raise ValueError(f"[dataset RandomHorizontalFlip] prob {prob} is outside [0, 1]")

    def _apply(self, x, rng):
        _image(x, "random_horizontal_flip")
        return np.ascontiguousarray(x[:, ::-1]) if rng.random() < self.prob else x


class RandomCrop(Transform):
    """Pads the image (padding: p, (left/right, top/bottom) or (left, top,
    right, bottom); fill_value for the border) and crops a random
    size = (h, w) window."""

    _name = "random_crop"
    _random = True

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

    def _apply(self, x, rng):
        _image(x, "random_crop")
        p = self.padding
        left, top, right, bottom = (p * 4 if len(p) == 1 else p * 2 if len(p) == 2 else p) if p else (0, 0, 0, 0)
        pad = [(top, bottom), (left, right)] + [(0, 0)] * (x.ndim - 2)
        padded = np.pad(x, pad, constant_values=np.array(self.fill_value).astype(x.dtype))
        h, w = self.size
        if h > padded.shape[0] or w > padded.shape[1]:
            raise ValueError(f"[dataset random_crop] crop {h}x{w} is larger than the padded image "
                             f"{padded.shape[0]}x{padded.shape[1]} (shape {x.shape})")
        r = int(rng.integers(0, padded.shape[0] - h + 1))
        c = int(rng.integers(0, padded.shape[1] - w + 1))
        return np.ascontiguousarray(padded[r:r + h, c:c + w])


__all__ = ["Decode", "Rescale", "Normalize", "HWC2CHW", "RandomHorizontalFlip", "RandomCrop"]
