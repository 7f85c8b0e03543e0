"""Training callbacks (MindSpore's Callback protocol).

Model.train calls, in order: on_train_begin, then per epoch
on_train_epoch_begin, per step on_train_step_begin / on_train_step_end,
on_train_epoch_end, and finally on_train_end; each gets a RunContext whose
original_args() is the CallbackParams namespace described there.
"""
import math
import os
import sys
import time

import numpy as np


class CallbackParams:
    """What callbacks see. Model fills it:

    network, optimizer, loss_fn, epoch_num, cur_epoch_num (1-based),
    batch_num (batches per epoch, None if unknown), cur_step_num (global,
    1-based), cur_step_in_epoch, batch_size (samples in the current step),
    net_outputs (the step's loss as float), epoch_loss (mean over the epoch,
    at epoch end), metrics (dict at epoch end: 'loss' and, with a validation
    set, 'eval_<name>' for each metric), samples_per_second (epoch average).
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)


class RunContext:
    """Handle a callback uses to read the parameters or stop training."""

    def __init__(self, cb_params):
        self._params = cb_params
        self._stop = False

    def original_args(self):
        return self._params

    def request_stop(self):
        self._stop = True

    def get_stop_requested(self):
        return self._stop


class Callback:
    """Base class; every hook is optional."""

    def on_train_begin(self, run_context):
        pass

    def on_train_epoch_begin(self, run_context):
        pass

    def on_train_step_begin(self, run_context):
        pass

    def on_train_step_end(self, run_context):
        pass

    def on_train_epoch_end(self, run_context):
        pass

    def on_train_end(self, run_context):
        pass


class CallbackList(Callback):
    def __init__(self, callbacks):
        if callbacks is None:
            callbacks = []
        elif isinstance(callbacks, Callback):
            callbacks = [callbacks]
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"[Model] callback {cb!r} is not a spora.train.Callback")
        self.callbacks = list(callbacks)

    def _each(name):
        def hook(self, run_context):
            for cb in self.callbacks:
                getattr(cb, name)(run_context)
        return hook

    on_train_begin = _each("on_train_begin")
    on_train_epoch_begin = _each("on_train_epoch_begin")
    on_train_step_begin = _each("on_train_step_begin")
    on_train_step_end = _each("on_train_step_end")
    on_train_epoch_end = _each("on_train_epoch_end")
    on_train_end = _each("on_train_end")


class LossMonitor(Callback):
    """Loss and samples/s while training.

    On a terminal: a progress bar per epoch, redrawn in place at most every
    `refresh` seconds. Otherwise (a log file, CI): one line per epoch.
    per_print_times > 0 also prints a line every that many steps.
    """

    def __init__(self, per_print_times=0, stream=None, refresh=0.1, width=30):
        self.per_print_times = int(per_print_times)
        self.stream = stream
        self.refresh = refresh
        self.width = width

    def _out(self):
        return self.stream if self.stream is not None else sys.stdout

    def _tty(self):
        out = self._out()
        return hasattr(out, "isatty") and out.isatty()

    def on_train_epoch_begin(self, run_context):
        self._t0 = time.perf_counter()
        self._last_draw = 0.0
        self._samples = 0
        self._loss_sum = 0.0
        self._steps = 0

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        loss = float(p.net_outputs)
        if not math.isfinite(loss):
            raise ValueError(f"[LossMonitor] loss is {loss} at epoch {p.cur_epoch_num} "
                             f"step {p.cur_step_in_epoch}: training diverged")
        self._samples += p.batch_size
        self._loss_sum += loss
        self._steps += 1
        now = time.perf_counter()
        if self.per_print_times and p.cur_step_num % self.per_print_times == 0:
            self._out().write(f"epoch {p.cur_epoch_num} step {p.cur_step_in_epoch}: loss {loss:.4f}\n")
        if self._tty() and (now - self._last_draw >= self.refresh or
                            (p.batch_num and p.cur_step_in_epoch == p.batch_num)):
            self._last_draw = now
            self._draw(p, loss, now)

    def _rate(self, now):
        dt = now - self._t0
        return self._samples / dt if dt > 0 else 0.0

    def _draw(self, p, loss, now):
        total = p.batch_num
        done = p.cur_step_in_epoch
        if total:
            filled = int(self.width * done / total)
            bar = "#" * filled + "." * (self.width - filled)
            pos = f"[{bar}] {done}/{total}"
        else:
            pos = f"step {done}"
        line = (f"\repoch {p.cur_epoch_num}/{p.epoch_num} {pos} loss {loss:.4f} "
                f"{self._rate(now):,.0f} samples/s")
        out = self._out()
        out.write(line + "\x1b[K")
        out.flush()

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        now = time.perf_counter()
        mean = self._loss_sum / max(self._steps, 1)
        extra = ""
        for k, v in sorted((getattr(p, "metrics", None) or {}).items()):
            if k.startswith("eval_"):
                extra += f" {k} {v:.4f}"
        text = (f"epoch {p.cur_epoch_num}/{p.epoch_num}: loss {mean:.4f}{extra}, "
                f"{self._rate(now):,.0f} samples/s, {now - self._t0:.1f} s")
        out = self._out()
        out.write(("\r" + text + "\x1b[K\n") if self._tty() else text + "\n")
        out.flush()


class TimeMonitor(Callback):
    """Prints each epoch's time and mean time per step; keeps them in .epoch_times."""

    def __init__(self, stream=None):
        self.stream = stream
        self.epoch_times = []

    def on_train_epoch_begin(self, run_context):
        self._t0 = time.perf_counter()
        self._steps = 0

    def on_train_step_end(self, run_context):
        self._steps += 1

    def on_train_epoch_end(self, run_context):
        dt = time.perf_counter() - self._t0
        self.epoch_times.append(dt)
        p = run_context.original_args()
        per_step = 1000.0 * dt / max(self._steps, 1)
        out = self.stream if self.stream is not None else sys.stdout
        out.write(f"epoch {p.cur_epoch_num} time: {dt:.2f} s, per step: {per_step:.3f} ms\n")
        out.flush()


class History(Callback):
    """Records every epoch's metrics: .epoch (1-based numbers) and
    .history {name: [value per epoch]} ('loss', plus 'eval_*' with a
    validation set)."""

    def __init__(self):
        self.epoch = []
        self.history = {}

    def on_train_begin(self, run_context):
        self.epoch = []
        self.history = {}

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        self.epoch.append(p.cur_epoch_num)
        for k, v in (p.metrics or {}).items():
            self.history.setdefault(k, []).append(v)


class EarlyStopping(Callback):
    """Stops training when `monitor` stops improving.

    monitor: a key of the epoch metrics ('loss', or 'eval_loss',
    'eval_accuracy', ... with a validation set). mode 'min', 'max' or 'auto'
    (max for names containing 'acc', else min). An improvement must beat the
    best by more than min_delta; after `patience` epochs without one, training
    stops. restore_best_weights puts back the parameters of the best epoch.
    """

    def __init__(self, monitor="eval_loss", min_delta=0.0, patience=0, mode="auto",
                 restore_best_weights=False):
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"[EarlyStopping] mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor = monitor
        self.min_delta = abs(float(min_delta))
        self.patience = int(patience)
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        self.mode = mode
        self.restore_best_weights = restore_best_weights
        self.stopped_epoch = 0
        self.best = None
        self.best_epoch = 0

    def _better(self, value):
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_train_begin(self, run_context):
        self.wait = 0
        self.best = None
        self.best_epoch = 0
        self.stopped_epoch = 0
        self._best_weights = None

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        metrics = p.metrics or {}
        if self.monitor not in metrics:
            raise KeyError(f"[EarlyStopping] monitor {self.monitor!r} is not among the epoch "
                           f"metrics {sorted(metrics)}; pass valid_dataset to Model.train for 'eval_*'")
        value = float(metrics[self.monitor])
        if self._better(value):
            self.best = value
            self.best_epoch = p.cur_epoch_num
            self.wait = 0
            if self.restore_best_weights:
                self._best_weights = [(q, q.asnumpy().copy()) for q in p.network.get_parameters()]
            return
        self.wait += 1
        if self.wait > self.patience:
            self.stopped_epoch = p.cur_epoch_num
            run_context.request_stop()

    def on_train_end(self, run_context):
        if self.restore_best_weights and self._best_weights is not None:
            from .. import Tensor
            for q, value in self._best_weights:
                q.set_data(Tensor(value))


class CheckpointConfig:
    """When ModelCheckpoint saves: every save_checkpoint_steps steps and/or every
    save_checkpoint_epochs epochs; keep_checkpoint_max newest files are kept."""

    def __init__(self, save_checkpoint_steps=None, save_checkpoint_epochs=1, keep_checkpoint_max=5):
        if not save_checkpoint_steps and not save_checkpoint_epochs:
            raise ValueError("[ModelCheckpoint] set save_checkpoint_steps or save_checkpoint_epochs")
        if keep_checkpoint_max is not None and int(keep_checkpoint_max) <= 0:
            raise ValueError(f"[ModelCheckpoint] keep_checkpoint_max must be positive, got {keep_checkpoint_max}")
        self.save_checkpoint_steps = save_checkpoint_steps
        self.save_checkpoint_epochs = save_checkpoint_epochs
        self.keep_checkpoint_max = keep_checkpoint_max


class ModelCheckpoint(Callback):
    """Saves the network's parameters to `directory`/`prefix`-<epoch>_<step>.ckpt.

    Each file is written atomically by spora.save_checkpoint (temp name,
    fsync, rename), so an interrupted run leaves the previous checkpoints
    loadable. Only the newest config.keep_checkpoint_max files are kept; the
    list is in .saved (oldest first) and the last one in .latest.
    """

    def __init__(self, prefix="model", directory=".", config=None):
        self.prefix = prefix
        self.directory = os.fspath(directory)
        self.config = config or CheckpointConfig()
        self.saved = []
        self.latest = None

    def _save(self, p):
        from ..serialization import save_checkpoint
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory,
                            f"{self.prefix}-{p.cur_epoch_num}_{p.cur_step_in_epoch}.ckpt")
        save_checkpoint(p.network, path)
        if path in self.saved:
            self.saved.remove(path)
        self.saved.append(path)
        self.latest = path
        keep = self.config.keep_checkpoint_max
        while keep is not None and len(self.saved) > keep:
            old = self.saved.pop(0)
            try:
                os.remove(old)
            except FileNotFoundError:
                pass

    def on_train_step_end(self, run_context):
        n = self.config.save_checkpoint_steps
        p = run_context.original_args()
        if n and p.cur_step_num % n == 0:
            self._save(p)

    def on_train_epoch_end(self, run_context):
        n = self.config.save_checkpoint_epochs
        p = run_context.original_args()
        if n and p.cur_epoch_num % n == 0:
            self._save(p)
