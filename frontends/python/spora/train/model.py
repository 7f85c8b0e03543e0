"""spora.train.Model: the training loop (MindSpore's Model).

    model = Model(net, nn.CrossEntropyLoss(), nn.Adam(net.trainable_params()), metrics={"accuracy"})
    model.train(5, train_batches, callbacks=[LossMonitor()], valid_dataset=test_batches)
    model.eval(test_batches)   # {"accuracy": ..., "loss": ...}

In GRAPH_MODE one training step -- forward, loss, gradients, optimizer
update -- is a single compiled graph (spora.jit of the step; Parameters and
optimizer state are graph weights, their updates graph outputs written back),
compiled once per batch shape. In PYNATIVE_MODE the same step runs eagerly.
"""
import time

import numpy as np

from .. import Tensor, _parallel, _zero, value_and_grad
from .. import profiler as _profiler
from ..nn import _util
from ..nn.cell import Cell
from ..nn.distributed import DistributedGradReducer
from ..nn.loss import WithLossCell
from .callbacks import CallbackList, CallbackParams, RunContext
from .metrics import Loss, get_metrics


def _to_tensor(x):
    if isinstance(x, Tensor):
        return x
    a = np.asarray(x)
    if a.dtype == np.float64:
        a = a.astype(np.float32)  # numpy's default float; networks are f32
    return Tensor(a)


def _split_batch(batch, where):
    if isinstance(batch, dict):
        raise TypeError(f"[Model] {where}: a batch must be a tuple (data, label), got a dict")
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise TypeError(f"[Model] {where}: each batch must be a tuple (data, label) of arrays or Tensors, "
                        f"got {type(batch).__name__}")
    *data, label = batch
    return [_to_tensor(d) for d in data], _to_tensor(label)


def _batch_size(t):
    return int(t.shape[0]) if len(t.shape) else 1


def _epochs_of(dataset, epochs, where):
    """Iterables are re-iterated each epoch; a one-shot iterator cannot be."""
    if iter(dataset) is dataset and epochs > 1:
        raise TypeError(f"[Model] {where}: the dataset is a one-shot iterator but {epochs} epochs were "
                        "asked for; pass a re-iterable (a list, or spora.dataset.NumpySlicesDataset(...).batch(n))")


class Model:
    """Trains and evaluates `network`.

    loss_fn: a loss Cell (or None when network already returns the loss).
    optimizer: an nn.Optimizer over (some of) the network's parameters.
    metrics: names ({"accuracy", "loss"}), Metric objects, or a dict of them,
    computed by eval() and, with valid_dataset, after each training epoch.
    eval_network: optional Cell(data, label) -> (logits, loss) used by eval.
    amp_level: "O0" (default) to "O3", mixed precision in amp_dtype (default
    bf16 on cpu), see spora.amp. loss_scale_manager: a
    spora.amp.FixedLossScaleManager / DynamicLossScaleManager (default:
    dynamic for f16, none for bf16, which has f32's range).
    """

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None, amp_level="O0",
                 loss_scale_manager=None, amp_dtype=None):
        if not isinstance(network, Cell):
            raise TypeError(f"[Model] network must be an nn.Cell, got {type(network).__name__}")
        from .. import amp
        amp._check_level(amp_level, "Model")
        if amp_level != "O0":
            amp.auto_mixed_precision(network, amp_level, amp_dtype)
        self.amp_level = amp_level
        self.loss_scale_manager = amp.resolve_loss_scale_manager(network, amp_level, loss_scale_manager)
        self.network = network
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.metrics = get_metrics(metrics)
        self.eval_network = eval_network
        self.train_network = WithLossCell(network, loss_fn) if loss_fn is not None else network
        self._train_step = None
        self._eval_step = None
        self._mode = None

    # -- steps ---------------------------------------------------------------
    def _build(self):
        mode = _util.graph_mode()
        if self._mode == mode and self._train_step is not None:
            return
        self._mode = mode
        self._train_step = self._make_train_step(mode) if self.optimizer is not None else None
        self._eval_step = self._make_eval_step(mode)

    def _make_train_step(self, graph):
        net, opt = self.train_network, self.optimizer
        if _parallel.pipeline_stages() > 1:  # each rank runs its stage (docs/parallel.md)
            from .._pipeline import PipelineTrainStep
            return PipelineTrainStep(net, opt)
        # Data parallel (spora.set_auto_parallel_context): gradients are
        # all-reduced across ranks before the update, inside the step graph.
        # With enable_parallel_optimizer at level2, the sharded parameters'
        # gradients are reduce-scattered instead (spora._zero).
        scatter = _zero.scatter_positions(opt)
        reducer = DistributedGradReducer(opt.parameters, scatter=scatter) if _parallel.data_parallel() else None
        if self.loss_scale_manager is not None:
            if scatter is not None:
                raise ValueError("[Model] optimizer_level 'level2' with a loss scale manager is not implemented: "
                                 "the overflow check needs whole gradients; use optimizer_level 'level1'")
            from ..amp import TrainOneStepWithLossScale
            return TrainOneStepWithLossScale(net, opt, self.loss_scale_manager, grad_reducer=reducer)
        grad_fn = value_and_grad(net, grad_position=None, weights=opt.parameters)

        def train_step(*inputs):
            loss, grads = grad_fn(*inputs)
            if reducer is not None:
                grads = reducer(grads)
            opt(grads)
            return loss

        if not graph:
            return train_step
        step = _util.jit(train_step)

        def run(*inputs):
            _util.before_graph_run(net)
            return step(*inputs)
        run.jit = step
        return run

    def _make_eval_step(self, graph):
        if self.eval_network is not None:
            net = self.eval_network

            def eval_step(*inputs):
                return net(*inputs)
        else:
            net, loss_fn = self.network, self.loss_fn

            def eval_step(*inputs):
                *data, label = inputs
                logits = net(*data)
                if loss_fn is None:
                    return logits, None
                return logits, loss_fn(logits, label)
        return _util.jit(eval_step) if graph else eval_step

    # -- training -------------------------------------------------------------
    def train(self, epoch, train_dataset, callbacks=None, valid_dataset=None, valid_frequency=1,
              initial_epoch=0, dataset_sink_mode=False):
        """Runs `epoch` epochs over train_dataset (any re-iterable of (data,
        label) batches; numpy float64 data is cast to float32), calling the
        callbacks. With valid_dataset, evaluates every valid_frequency epochs
        and adds 'eval_<metric>' to the epoch metrics callbacks see. Returns
        the list of epoch metric dicts."""
        if self.optimizer is None:
            raise ValueError("[Model] train needs an optimizer: Model(net, loss_fn, optimizer)")
        epoch = int(epoch)
        if epoch <= 0:
            raise ValueError(f"[Model] epoch must be positive, got {epoch}")
        _epochs_of(train_dataset, epoch - initial_epoch, "train")
        if valid_dataset is not None:
            _epochs_of(valid_dataset, epoch - initial_epoch, "valid_dataset")
        self._build()
        cbs = CallbackList(callbacks)
        try:
            batch_num = len(train_dataset)
        except TypeError:
            batch_num = None
        params = CallbackParams(network=self.network, train_network=self.train_network,
                                optimizer=self.optimizer, loss_fn=self.loss_fn, epoch_num=epoch,
                                cur_epoch_num=initial_epoch, batch_num=batch_num, cur_step_num=0,
                                cur_step_in_epoch=0, batch_size=0, net_outputs=None, epoch_loss=None,
                                metrics={}, samples_per_second=0.0, train_dataset=train_dataset)
        ctx = RunContext(params)
        history = []
        self.network.set_train(True)
        cbs.on_train_begin(ctx)
        for e in range(initial_epoch + 1, epoch + 1):
            self.network.set_train(True)
            params.cur_epoch_num = e
            params.cur_step_in_epoch = 0
            params.metrics = {}
            cbs.on_train_epoch_begin(ctx)
            t0 = time.perf_counter()
            loss_sum, samples, steps = 0.0, 0, 0
            for batch in train_dataset:
                data, label = _split_batch(batch, "train")
                params.cur_step_num += 1
                params.cur_step_in_epoch += 1
                params.batch_size = _batch_size(data[0])
                cbs.on_train_step_begin(ctx)
                mark = _profiler._range_begin("step", f"step {params.cur_step_num}") if _profiler._active else 0
                loss = self._train_step(*data, label)
                value = float(loss.asnumpy())
                _profiler._range_end(mark)  # the step's span ends once its loss is read back
                params.net_outputs = value
                loss_sum += value * params.batch_size
                samples += params.batch_size
                steps += 1
                cbs.on_train_step_end(ctx)
                if ctx.get_stop_requested():
                    break
            if steps == 0:
                raise ValueError(f"[Model] train: epoch {e} got no batches from the dataset")
            dt = time.perf_counter() - t0
            params.samples_per_second = samples / dt if dt > 0 else 0.0
            params.epoch_loss = loss_sum / samples
            metrics = {"loss": params.epoch_loss}
            if valid_dataset is not None and (e - initial_epoch) % int(valid_frequency) == 0:
                for k, v in self.eval(valid_dataset).items():
                    metrics["eval_" + k] = v
            params.metrics = metrics
            history.append(dict(metrics))
            cbs.on_train_epoch_end(ctx)
            if ctx.get_stop_requested():
                break
        cbs.on_train_end(ctx)
        self.network.set_train(False)
        return history

    fit = train

    # -- evaluation -----------------------------------------------------------
    def eval(self, valid_dataset):
        """{metric name: value} over valid_dataset in eval mode (no dropout,
        BatchNorm's moving statistics). Without metrics, reports the loss."""
        self._build()
        metrics = self.metrics or ({"loss": Loss()} if self.loss_fn is not None else {})
        if not metrics:
            raise ValueError("[Model] eval needs metrics or a loss_fn")
        for m in metrics.values():
            m.clear()
        was_training = self.network.training
        self.network.set_train(False)
        seen = 0
        try:
            for batch in valid_dataset:
                data, label = _split_batch(batch, "eval")
                logits, loss = self._eval_step(*data, label)
                n = _batch_size(data[0])
                seen += n
                for m in metrics.values():
                    if isinstance(m, Loss):
                        if loss is None:
                            raise ValueError("[Model] the 'loss' metric needs a loss_fn")
                        m.update(loss, n)
                    else:
                        m.update(logits, label)
        finally:
            self.network.set_train(was_training)
        if seen == 0:
            raise ValueError("[Model] eval: the dataset gave no batches")
        return {name: m.eval() for name, m in metrics.items()}

    def predict(self, *predict_data):
        """The network's output for the given inputs, in eval mode."""
        was_training = self.network.training
        self.network.set_train(False)
        try:
            return self.network(*[_to_tensor(d) for d in predict_data])
        finally:
            self.network.set_train(was_training)
