"""spora.amp: mixed-precision training (MindSpore's amp).

    net = spora.amp.auto_mixed_precision(net, "O2")            # bf16 on cpu
    model = Model(net, loss, opt, amp_level="O2")               # the same, via Model
    step = spora.amp.build_train_network(net, opt, loss, level="O2",
                                         loss_scale_manager=DynamicLossScaleManager())
    loss = step(x, y)

Levels (dtype: spora.bfloat16 or spora.float16; default bf16 on cpu, except
on a cpu without bf16 dot-product instructions, see below):
  O0  nothing changes (bit-identical to no amp).
  O1  the matrix-product cells (Dense, Conv2d) compute in dtype; their
      outputs are cast back to f32, everything else stays f32.
  O2  the whole network computes in dtype except the cells that need f32
      range or accumulation (BatchNorm, LayerNorm, Softmax, LogSoftmax and
      losses); the network's output is cast back to f32.
  O3  the whole network in dtype, no exceptions; output cast back to f32.
Parameters always stay f32 (the master copies the optimizer updates): a
cell running in dtype reads a cast of each trainable Parameter, and the
gradient of that cast arrives in f32.

Compiled (GRAPH_MODE, spora.jit), bf16 at O1 and O2 is done by the core's
mixed_precision pass (run by name after the jit level's passes) instead of casts at cell
boundaries: it converts the compute-bound matrix products and
convolutions -- forward and backward -- to bf16, casts each weight once per
step and passes bf16 straight between chained products. Memory-bound ops
stay f32 there: on the cpu they gain nothing from bf16, while the products
run on the bf16 dot-product instructions, at twice the f32 peak where the
cpu has them at full rate (see below).

On the cpu, bf16 is the default only where it is faster. Having bf16
instructions is not enough:
  - a cpu without bf16 dot-product instructions (the cpu device's arch
    lacks "bf16": AVX2, or AVX-512 without avx512_bf16) only emulates bf16
    products, measured 4-11x slower than f32 (MLP b128 training step, 1
    thread, oneDNN capped at AVX-512 / AVX2 on an AVX-512 + bf16 Xeon);
  - some cpus with them run VDPBF16PS at a quarter of the FMA instruction
    rate, so bf16 products reach half the f32 peak (a Sapphire Rapids-class
    Xeon VM without AMX: 86 vs 172 GFLOP/s per core, oneDNN's and PyTorch's
    bf16 matmuls alike), while Zen 4 runs them at twice the f32 peak.
So the first auto_mixed_precision call on the cpu with the default dtype
times a bf16 and an f32 matmul through the cpu plugin (a few hundred
milliseconds at most, once per process; cpu_bf16_choice()) and keeps bf16
only when the bf16 product is at least BF16_MIN_SPEEDUP times as fast. Where
it is not, levels O1-O3 change nothing (f32 math) and a warning names the
reason. SPORA_AMP_CPU_BF16=1 or =0 sets the choice without measuring (auto,
the default, measures). An explicit dtype=spora.bfloat16 is always
honoured, with a warning where bf16 is emulated or measured slower.

Loss scaling keeps small f16 gradients from flushing to zero: the loss is
multiplied by the scale before differentiation and the gradients divided by
it after. bf16 has f32's exponent range, so it needs no loss scale; f16
does (Model and build_train_network default to DynamicLossScaleManager for
f16).
"""
import os

import numpy as np

from . import _C, _dtype
from ._autograd import value_and_grad
from ._jit import JitFunction
from ._tensor import Tensor

__all__ = ["auto_mixed_precision", "build_train_network", "all_finite", "FixedLossScaleManager",
           "DynamicLossScaleManager", "LossScaleManager", "TrainOneStepWithLossScale", "default_dtype",
           "cpu_has_bf16", "cpu_bf16_choice"]

LEVELS = ("O0", "O1", "O2", "O3")


def default_dtype(device=None):
    """bf16 on cpu-like devices (cpu, sim): the cpu's f16 matmul/conv
    kernels are slow or missing, bf16 keeps f32's range (no loss scale
    needed), and cpus with full-rate bf16 dot products run them at twice the
    f32 peak (where bf16 is slower, auto_mixed_precision keeps f32 instead:
    cpu_bf16_choice). f16 elsewhere."""
    name = str(device if device is not None else _C.get_device())
    return _dtype.bfloat16 if name.split(":")[0] in ("cpu", "sim") else _dtype.float16


def cpu_has_bf16():
    """True when the cpu device's kernels have bf16 dot-product
    instructions (its arch names "bf16", as the cpu plugin reports what
    oneDNN uses, ONEDNN_MAX_CPU_ISA included)."""
    try:
        return "bf16" in _C.device_properties("cpu").get("arch", "")
    except Exception:  # no cpu device: nothing to say about it
        return True


# O2 also casts weights and activations to bf16 and back, so the products
# must be clearly faster than f32 for a step to gain: where they run at
# twice the f32 peak (Zen 4) the MLP step gains 1.5-1.7x.
BF16_MIN_SPEEDUP = 1.2
_ENV = "SPORA_AMP_CPU_BF16"
_measured = None  # (speedup, bf16 ms, f32 ms), once per process


def _arch():
    try:
        return _C.device_properties("cpu").get("arch", "?")
    except Exception:
        return "?"


def _measure_cpu_bf16():
    """(f32 time / bf16 time, bf16 ms, f32 ms) of a 256x512 @ 512x512
    matmul on the cpu device: the minimum process CPU time of 15 runs each,
    alternated, so a busy machine slows both alike and the minimum skips
    the runs it interrupted. The products are checked to really be bf16
    and f32 (a bf16 result within bf16 rounding of the f32 one)."""
    import time
    from . import ops
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    b = (rng.standard_normal((512, 512)) * 0.05).astype(np.float32)
    dev = _C.get_device()
    pairs = {}
    for dt in (_dtype.float32, _dtype.bfloat16):
        pairs[dt.name] = (Tensor(a).astype(dt), Tensor(b).astype(dt))
    best, outs = {}, {}
    for rep in range(16):
        for name, (x, w) in pairs.items():
            _C.synchronize(dev)
            t = time.process_time()
            y = ops.matmul(x, w)
            _C.synchronize(dev)
            t = time.process_time() - t
            if rep == 0:  # the first run of each plans and allocates
                outs[name] = y
            else:
                best[name] = min(best.get(name, t), t)
    if outs["bfloat16"].dtype != _dtype.bfloat16:
        raise RuntimeError(f"[amp] the bf16 probe matmul returned {outs['bfloat16'].dtype}")
    y16 = outs["bfloat16"].astype(_dtype.float32).asnumpy()
    y32 = outs["float32"].asnumpy()
    if not np.allclose(y16, y32, rtol=3e-2, atol=3e-2 * float(np.abs(y32).max())):
        raise RuntimeError("[amp] the bf16 probe matmul disagrees with f32 beyond bf16 rounding")
    # process_time ticks in ~1 us; a floor keeps the ratio finite
    t16, t32 = max(best["bfloat16"], 1e-6), max(best["float32"], 1e-6)
    return t32 / t16, t16 * 1e3, t32 * 1e3


def cpu_bf16_choice():
    """(use_bf16, reason): whether amp's default dtype computes in bf16 on
    the cpu device, and why, in words fit for a warning. SPORA_AMP_CPU_BF16
    =1 or =0 decides; unset or "auto": False without bf16 dot-product
    instructions, else True when a bf16 matmul measured at least
    BF16_MIN_SPEEDUP times as fast as f32 (measured on the first call, then
    remembered for the process)."""
    global _measured
    env = os.environ.get(_ENV, "auto").strip().lower()
    if env in ("1", "0"):
        return env == "1", f"{_ENV}={env}"
    if env not in ("", "auto"):
        raise ValueError(f"[amp] {_ENV} must be auto, 1 or 0, got {os.environ[_ENV]!r}")
    arch = _arch()
    if not cpu_has_bf16():
        return False, (f"this cpu ({arch}) has no bf16 dot-product instructions: bf16 is emulated and runs "
                       "several times slower than f32")
    if _measured is None:
        _measured = _measure_cpu_bf16()
    speedup, t16, t32 = _measured
    use = speedup >= BF16_MIN_SPEEDUP
    return use, (f"a bf16 matmul measured {speedup:.2f}x the speed of f32 on this cpu ({arch}: "
                 f"{t16:.2f} vs {t32:.2f} ms for 256x512 @ 512x512; bf16 is the default from "
                 f"{BF16_MIN_SPEEDUP}x)")


def _on_cpu():
    return str(_C.get_device()).split(":")[0] == "cpu"


def _check_level(level, where):
    if level not in LEVELS:
        raise ValueError(f"[{where}] amp_level must be one of {', '.join(LEVELS)}, got {level!r}")
    return level


def _classes():
    from .nn.layer.activation import LogSoftmax, Softmax
    from .nn.layer.basic import Dense
    from .nn.layer.conv import Conv2d
    from .nn.layer.normalization import LayerNorm, _BatchNorm
    from .nn.loss import LossBase
    return (Dense, Conv2d), (_BatchNorm, LayerNorm, Softmax, LogSoftmax, LossBase)


def auto_mixed_precision(network, amp_level="O0", dtype=None):
    """Marks `network`'s cells to run at `amp_level` in `dtype` (see the
    module docstring); returns `network`. Calling it again replaces the
    previous marks; explicit Cell.to_float settings win over them."""
    from .nn import _amp
    from .nn.cell import Cell
    if not isinstance(network, Cell):
        raise TypeError(f"[auto_mixed_precision] network must be an nn.Cell, got {type(network).__name__}")
    _check_level(amp_level, "auto_mixed_precision")
    dt = default_dtype() if dtype is None else _amp.check_dtype(dtype, "auto_mixed_precision")
    if amp_level != "O0" and dt.name == "bfloat16" and _on_cpu():
        import warnings
        use, reason = cpu_bf16_choice()
        if dtype is None and not use:
            warnings.warn(f"[auto_mixed_precision] {reason}, so amp_level {amp_level} keeps f32 "
                          "(pass dtype=spora.bfloat16 to force bf16)", stacklevel=2)
            amp_level = "O0"
        elif not use and not reason.startswith(_ENV):
            warnings.warn(f"[auto_mixed_precision] {reason}: dtype=bfloat16 is honoured as asked, but the "
                          "network will likely run slower than in f32", stacklevel=2)
    cells = [c for _, c in network.cells_and_names()]
    for c in cells:
        object.__setattr__(c, "_amp_auto", None)
    object.__setattr__(network, "_amp_level", (amp_level, dt))
    if amp_level == "O0":
        return network
    white, black = _classes()
    use_pass = dt.name == "bfloat16" and amp_level in ("O1", "O2")
    if amp_level == "O1":
        for c in cells:
            if isinstance(c, white):
                object.__setattr__(c, "_amp_auto", _amp.AutoMark(dt, use_pass, True))
        return network
    f32 = _amp.AutoMark(_dtype.float32, use_pass, False)
    low = _amp.AutoMark(dt, use_pass, False)
    for c in cells:
        keep = amp_level == "O2" and isinstance(c, black)
        object.__setattr__(c, "_amp_auto", f32 if keep else low)
    # The top cell returns f32 (what losses and metrics expect).
    object.__setattr__(network, "_amp_auto", _amp.AutoMark(dt, use_pass, True))
    return network


def all_finite(tensors):
    """A bool scalar Tensor: True when every element of every tensor is
    finite. Composed from registry ops, one pass over each tensor: x * 0 is
    0 for every finite x and NaN for inf or NaN, and a sum of zeros is
    exactly 0 while any NaN makes it NaN."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    if not tensors:
        raise ValueError("[all_finite] needs at least one tensor")
    total = None
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"[all_finite] expects Tensors, got {type(t).__name__}")
        if not t.dtype.is_floating_point:
            continue  # integers are always finite
        s = (t * 0.0).sum()
        if s.dtype != _dtype.float32:
            s = s.astype(_dtype.float32)
        total = s if total is None else total + s
    if total is None:
        return Tensor(np.array(True))
    return total == 0.0


class LossScaleManager:
    """Base of the loss-scale managers: the current scale, whether a step
    with non-finite gradients is skipped, and the update after each step."""

    def get_loss_scale(self):
        raise NotImplementedError(f"[{type(self).__name__}] get_loss_scale")

    def get_drop_overflow_update(self):
        raise NotImplementedError(f"[{type(self).__name__}] get_drop_overflow_update")

    def update_loss_scale(self, overflow):
        raise NotImplementedError(f"[{type(self).__name__}] update_loss_scale")


class FixedLossScaleManager(LossScaleManager):
    """A constant scale. drop_overflow_update=True (MindSpore's default)
    skips the optimizer step when a gradient is inf or NaN; False always
    steps (and then needs no finiteness check, so the step stays one
    compiled graph)."""

    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        loss_scale = float(loss_scale)
        if not loss_scale >= 1.0 or not np.isfinite(loss_scale):
            raise ValueError(f"[FixedLossScaleManager] loss_scale must be a finite number >= 1, got {loss_scale}")
        self.loss_scale = loss_scale
        self.drop_overflow_update = bool(drop_overflow_update)

    def get_loss_scale(self):
        return self.loss_scale

    def get_drop_overflow_update(self):
        return self.drop_overflow_update

    def update_loss_scale(self, overflow):
        pass


class DynamicLossScaleManager(LossScaleManager):
    """A scale that adapts: a step whose gradients overflow (inf or NaN) is
    skipped and the scale divided by scale_factor (not below 1); after
    scale_window good steps in a row it is multiplied by scale_factor."""

    def __init__(self, init_loss_scale=2.0 ** 24, scale_factor=2, scale_window=2000):
        init_loss_scale, scale_factor = float(init_loss_scale), float(scale_factor)
        if not init_loss_scale >= 1.0 or not np.isfinite(init_loss_scale):
            raise ValueError(f"[DynamicLossScaleManager] init_loss_scale must be a finite number >= 1, "
                             f"got {init_loss_scale}")
        if not scale_factor > 1.0:
            raise ValueError(f"[DynamicLossScaleManager] scale_factor must be > 1, got {scale_factor}")
        if int(scale_window) < 1:
            raise ValueError(f"[DynamicLossScaleManager] scale_window must be >= 1, got {scale_window}")
        self.loss_scale = init_loss_scale
        self.scale_factor = scale_factor
        self.scale_window = int(scale_window)
        self.good_steps = 0

    def get_loss_scale(self):
        return self.loss_scale

    def get_drop_overflow_update(self):
        return True

    def update_loss_scale(self, overflow):
        if overflow:
            self.loss_scale = max(self.loss_scale / self.scale_factor, 1.0)
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps >= self.scale_window:
            grown = self.loss_scale * self.scale_factor
            if np.isfinite(np.float32(grown)):
                self.loss_scale = grown
            self.good_steps = 0


class TrainOneStepWithLossScale:
    """One training step with loss scaling: step(*inputs) -> loss (f32,
    unscaled). `network` returns the loss (a WithLossCell). With a manager
    that drops overflowing updates, the step is two parts -- forward and
    backward with the finiteness check, then the optimizer -- and the host
    reads the check between them (in GRAPH_MODE each part is one compiled
    graph); a skipped step leaves every Parameter and optimizer state as it
    was. Counters: steps, skipped. grad_reducer (data parallel: a
    DistributedGradReducer) all-reduces the unscaled gradients before the
    finiteness check, so every rank sees the same overflow and skips
    together."""

    def __init__(self, network, optimizer, loss_scale_manager, grad_reducer=None):
        if not isinstance(loss_scale_manager, LossScaleManager):
            raise TypeError(f"[TrainOneStepWithLossScale] loss_scale_manager must be a LossScaleManager, "
                            f"got {type(loss_scale_manager).__name__}")
        self.network, self.optimizer, self.manager = network, optimizer, loss_scale_manager
        self.steps = 0
        self.skipped = 0
        self.last_overflow = False
        self._scale_value = None
        self._scale_tensor = None
        self._mode = None

        def scaled_loss(*args):
            *inputs, scale = args
            return network(*inputs) * scale

        grad_fn = value_and_grad(scaled_loss, grad_position=None, weights=optimizer.parameters)
        check = self.manager.get_drop_overflow_update()

        def forward_backward(*args):
            inv = 1.0 / args[-1]
            loss, grads = grad_fn(*args)
            grads = tuple(g * inv for g in grads)
            if grad_reducer is not None:
                grads = tuple(grad_reducer(grads))
            return loss * inv, grads, (all_finite(grads) if check else None)

        def apply(grads):
            optimizer(grads)

        def whole(*args):
            loss, grads, _ = forward_backward(*args)
            optimizer(grads)
            return loss

        self._fns = (forward_backward, apply, whole)

    def _compiled(self):
        from .nn import _util
        graph = _util.graph_mode()
        if self._mode != graph:
            self._mode = graph
            fb, ap, wh = self._fns
            self._run = tuple(JitFunction(f) for f in (fb, ap, wh)) if graph else (fb, ap, wh)
        return self._run

    def _scale(self):
        s = self.manager.get_loss_scale()
        if s != self._scale_value:
            self._scale_value = s
            self._scale_tensor = Tensor(np.array(s, dtype=np.float32))
        return self._scale_tensor

    def __call__(self, *inputs):
        from .nn import _util
        fb, ap, wh = self._compiled()
        if self._mode:
            _util.before_graph_run(self.network)
        self.steps += 1
        scale = self._scale()
        if not self.manager.get_drop_overflow_update():
            self.last_overflow = False
            return wh(*inputs, scale)
        loss, grads, finite = fb(*inputs, scale)
        overflow = not bool(finite.asnumpy())
        self.last_overflow = overflow
        if overflow:
            self.skipped += 1
        else:
            ap(grads)
        self.manager.update_loss_scale(overflow)
        return loss


def build_train_network(network, optimizer, loss_fn=None, level="O0", dtype=None, loss_scale_manager=None):
    """A training step for `network` at amp `level`: marks the network
    (auto_mixed_precision), wraps it with loss_fn (WithLossCell) and returns
    a callable step(*inputs, label) -> loss. With a loss_scale_manager (by
    default DynamicLossScaleManager() for f16, none for bf16) the step is a
    TrainOneStepWithLossScale; without one, forward, gradients and update
    are one function (compiled as one graph in GRAPH_MODE)."""
    from . import _parallel
    from .nn.distributed import DistributedGradReducer
    from .nn.loss import WithLossCell
    _check_level(level, "build_train_network")
    if level != "O0":
        auto_mixed_precision(network, level, dtype)
    net = WithLossCell(network, loss_fn) if loss_fn is not None else network
    manager = resolve_loss_scale_manager(network, level, loss_scale_manager)
    # Data parallel (spora.set_auto_parallel_context): all-reduce gradients.
    reducer = DistributedGradReducer(optimizer.parameters) if _parallel.data_parallel() else None
    if manager is not None:
        return TrainOneStepWithLossScale(net, optimizer, manager, grad_reducer=reducer)
    return _PlainStep(net, optimizer, reducer)


def resolve_loss_scale_manager(network, level, manager):
    """The manager given, or the default for the network's amp dtype."""
    if manager is not None:
        if not isinstance(manager, LossScaleManager):
            raise TypeError(f"[amp] loss_scale_manager must be a LossScaleManager, got {type(manager).__name__}")
        return manager
    lv = network.__dict__.get("_amp_level")
    if level != "O0" and lv is not None and lv[1].name == "float16":
        return DynamicLossScaleManager()
    return None


class _PlainStep:
    def __init__(self, network, optimizer, reducer=None):
        self.network, self.optimizer = network, optimizer
        grad_fn = value_and_grad(network, grad_position=None, weights=optimizer.parameters)

        def step(*inputs):
            loss, grads = grad_fn(*inputs)
            if reducer is not None:
                grads = reducer(grads)
            optimizer(grads)
            return loss
        self._fn = step
        self._jit = JitFunction(step)

    def __call__(self, *inputs):
        from .nn import _util
        if _util.graph_mode():
            _util.before_graph_run(self.network)
            return self._jit(*inputs)
        return self._fn(*inputs)


# -- MindSpore 2.x's functional loss scalers --------------------------------------------
# For a training step written by hand (value_and_grad + optimizer), as
# MindSpore's mixed-precision tutorial does: scale the loss before the
# gradients, unscale the loss and gradients after, adjust from all_finite.


def _map(fn, inputs):
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_map(fn, x) for x in inputs)
    return fn(inputs)


class StaticLossScaler:
    """A fixed scale: scale(x) = x * scale_value, unscale(x) = x /
    scale_value (x a Tensor or a nested tuple/list of them); adjust does
    nothing."""

    def __init__(self, scale_value):
        from ._parameter import Parameter
        if not float(scale_value) > 0:
            raise ValueError(f"[LossScaler] scale_value must be > 0, got {scale_value}")
        self.scale_value = Parameter(Tensor(np.array(float(scale_value), np.float32)), name="scale_value",
                                     requires_grad=False)

    def scale(self, inputs):
        return _map(lambda x: x * self.scale_value.astype(x.dtype), inputs)

    def unscale(self, inputs):
        return _map(lambda x: x / self.scale_value.astype(x.dtype), inputs)

    def adjust(self, grads_finite):
        return False


class DynamicLossScaler(StaticLossScaler):
    """A scale that follows overflow: adjust(grads_finite) -- the bool of
    all_finite(grads) -- multiplies the scale by scale_factor after
    scale_window finite steps in a row, and divides it by scale_factor
    (not below 1) after a step that overflowed. Works eagerly and inside a
    compiled step (the scale and the counter are Parameters updated by
    assign_value)."""

    def __init__(self, scale_value, scale_factor, scale_window):
        super().__init__(scale_value)
        from ._parameter import Parameter
        if not float(scale_factor) > 1:
            raise ValueError(f"[DynamicLossScaler] scale_factor must be > 1, got {scale_factor}")
        if isinstance(scale_window, bool) or not isinstance(scale_window, int) or scale_window <= 0:
            raise ValueError(f"[DynamicLossScaler] scale_window must be a positive int, got {scale_window}")
        self.scale_factor, self.scale_window = float(scale_factor), int(scale_window)
        self.counter = Parameter(Tensor(np.array(0, np.int32)), name="counter", requires_grad=False)

    def adjust(self, grads_finite):
        from . import ops
        finite = grads_finite if isinstance(grads_finite, Tensor) else Tensor(np.array(bool(grads_finite)))
        zero = ops.zeros_like(self.counter)
        counter = ops.where(finite, self.counter + 1, zero)
        grow = counter >= self.scale_window
        scale = self.scale_value
        grown = ops.where(grow, scale * self.scale_factor, scale)
        shrunk = ops.maximum(scale / self.scale_factor, ops.ones_like(scale))
        self.scale_value.assign_value(ops.where(finite, grown, shrunk))
        self.counter.assign_value(ops.where(grow, zero, counter))
        return finite


__all__ += ["StaticLossScaler", "DynamicLossScaler"]
