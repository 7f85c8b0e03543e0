"""Making and inspecting parallel plans (docs/parallel.md).

    spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="dynamic_programming")
    ... train a compiled step ...
    spora.parallel.describe_plan(net)   # per-op strategies, estimated step time, memory per device

    # Or plan without running, for any number of devices, from shapes alone:
    with spora.nn.utils.no_init_parameters():
        net = Net()
    report = spora.parallel.plan(step, x, y, device_num=1024, mesh_shape=(64, 16))
    spora.parallel.describe_plan(report)
"""
from . import _jit, _parallel, _spmd


def describe_plan(obj, file=None):
    """Prints (to `file`, default stdout) and returns the partition plan of
    `obj`: a Cell or Model (the latest compiled step that partitioned its
    Parameters), a spora.jit step, or the report dict itself. Under
    auto_parallel with search_mode="dynamic_programming" it lists each op's
    chosen strategy and layouts, the estimated step time (compute and
    communication) and the memory per device; under semi_auto_parallel and
    sharding_propagation, each weight's layout and each op's decision."""
    text = _spmd.describe(_spmd.plan_of(obj))
    print(text, file=file)
    return text


def describe_optimizer_sharding(optimizer, file=None):
    """Prints (to `file`, default stdout) and returns how enable_parallel_optimizer
    shards `optimizer`'s state on this rank: each parameter sharded (its
    block) or replicated and why, and the state bytes measured, predicted
    and replicated (docs/parallel.md, "Optimizer-state sharding (ZeRO)")."""
    from . import _zero
    text = _zero.describe(optimizer)
    print(text, file=file)
    return text


def gather(p):
    """The whole value of Parameter p (numpy); collective when p is split."""
    return _spmd.gather(p)


def plan(step, *inputs, device_num, mesh_shape=None, axis_names=None, parallel_mode="auto_parallel",
         search_mode="dynamic_programming", memory_limit=None, device_spec=None, topology=None, **kwargs):
    """The partition plan of a training step for `device_num` devices, made
    without running it, without communicators or ranks and without reading
    any Parameter's data: the step is traced as spora.jit traces it
    (forward, loss, gradients, optimizer update) and handed to the core's
    SPMD pass (and, under auto_parallel with search_mode
    "dynamic_programming", its strategy search) for rank 0 of the mesh.
    Parameters declared under spora.nn.utils.no_init_parameters and inputs
    declared as Tensor(shape=, dtype=) work, so models larger than this
    machine's memory can be planned.

    step: a function of the inputs (what spora.jit would compile), a
    spora.jit function, a Cell (its construct), or a spora.train.Model (its
    training step: network, loss, gradients and optimizer). *inputs /
    **kwargs: its arguments; Tensors are read for shape and dtype only.
    The options are set_auto_parallel_context's (device_num, mesh_shape,
    axis_names, parallel_mode "auto_parallel" or "semi_auto_parallel",
    search_mode, memory_limit in bytes per device, device_spec, topology).

    Returns the report a compiled step's last_plan holds (describe_plan
    prints it): each weight's layout and local shape, each op's decision,
    and under the search the estimated step time and memory per device.
    Every rank's plan is the same but for its coordinates; "rank" is 0."""
    opts = dict(parallel_mode=parallel_mode, search_mode=search_mode, memory_limit=memory_limit,
                device_spec=device_spec, topology=topology)
    for k, v in opts.items():
        _parallel.check_option(k, v)
    if parallel_mode not in (_parallel.SEMI_AUTO_PARALLEL, _parallel.AUTO_PARALLEL):
        raise ValueError(f"[parallel] plan: parallel_mode must be 'semi_auto_parallel' or 'auto_parallel', got "
                         f"{parallel_mode!r} (other modes do not partition)")
    shape, names = _parallel.mesh_of(device_num, mesh_shape, axis_names)
    fn = _step_function(step)
    from .nn.utils import no_init_parameters
    with no_init_parameters():  # what the trace creates (dropout noise) is declared, not drawn
        graph, state, n_out, assigned = _jit.trace_step(fn, inputs, kwargs)
    auto = parallel_mode == _parallel.AUTO_PARALLEL
    search = _parallel.search_options_of(opts) if auto else None
    return _spmd.plan_only(graph, state, n_out, assigned, shape, names, not auto, search)


def _step_function(step):
    from .train import Model
    if isinstance(step, Model):
        if step.optimizer is None:
            raise ValueError("[parallel] plan: the Model has no optimizer, so no training step to plan")
        return step._make_train_step(False)
    if isinstance(step, _jit.JitFunction):
        return step.fn
    if not callable(step):
        raise TypeError(f"[parallel] plan: step must be a function, a spora.jit function, a Cell or a Model, got "
                        f"{type(step).__name__}")
    return step


def pipeline_train_step(pipeline_cell, optimizer):
    """The training step of an nn.PipelineCell under pipeline_stages > 1
    (what Model.train uses): step(*inputs) runs this rank's stage over the
    micro-batches in the pipeline_scheduler's order ("1f1b" or "gpipe"),
    updates this stage's Parameters and returns the batch's loss on every
    rank. docs/parallel.md, "Pipeline parallelism"."""
    from ._pipeline import PipelineTrainStep
    return PipelineTrainStep(pipeline_cell, optimizer)
