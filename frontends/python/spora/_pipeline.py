"""Pipeline parallelism, the runtime (docs/parallel.md, "Pipeline
parallelism"): one rank per stage runs its stage's compiled forward and
backward graphs over the micro-batches in a GPipe or 1F1B order, sending
activations to the next stage and gradients to the previous one, sums the
gradients of its own Parameters over the micro-batches and updates only
those.

The graphs come from the core (Graph.pipeline_stage over
spora_graph_pipeline_stage): the wrapped network is traced once on one
micro-batch, with each Cell that has a pipeline_stage marking the nodes its
call recorded; the core cuts the trace into stages. A stage's backward graph
recomputes its forward from the stage's inputs (GPipe's re-materialisation),
so a micro-batch in flight keeps only what the stage received.

Send/recv are blocking, so the order of the transfers between two
neighbours must be the same on both sides. GPipe: every forward, then every
backward, in micro-batch order. 1F1B: stage k runs min(stages-k-1, M)
forwards, then alternates one forward and one backward, then the remaining
backwards; after a forward that a backward follows it receives that
backward's gradient before sending the forward's output, which is the order
the next stage sends and receives them in (a forward's input, then a
backward's output).
"""
import json
import time

import numpy as np

from . import _C, _parallel
from ._tensor import Tensor

# Marks collected while the pipeline traces a network: (first, end, stage).
_collecting = []
# Communicators split from the world (a stage's data-parallel replicas):
# freed before the world is (communication.release()).
_comms = []


def release_comms():
    for c in _comms:
        c.release()
    _comms.clear()


def collecting():
    return bool(_collecting)


def call_staged(cell, args, kwargs):
    """cell(*args, **kwargs) while the pipeline traces: the op nodes its call
    records run in cell.pipeline_stage (inner cells, marked first, win)."""
    graph = _C.current_trace().graph
    first = graph.num_nodes()
    stage = cell.__dict__.pop("_pipeline_stage")
    try:
        out = cell(*args, **kwargs)
    finally:
        cell.__dict__["_pipeline_stage"] = stage
    _collecting[-1].append((first, graph.num_nodes(), stage))
    return out


def _nbytes(t):
    from .nn import _util
    return int(np.prod(t.shape, dtype=np.int64)) * _util.np_dtype(t.dtype).itemsize


def schedule(kind, stage, stages, micro):
    """The order of stage `stage`'s forward ("F", i) and backward ("B", i) steps."""
    if kind == "gpipe":
        return [("F", i) for i in range(micro)] + [("B", i) for i in range(micro)]
    warm = min(stages - stage - 1, micro)
    ops = [("F", i) for i in range(warm)]
    for k in range(micro - warm):
        ops += [("F", warm + k), ("B", k)]
    return ops + [("B", i) for i in range(micro - warm, micro)]


def bubble_fraction(stages, micro):
    """The idle share of an ideal GPipe/1F1B step with equal stages:
    (stages - 1) / (micro + stages - 1)."""
    return (stages - 1) / (micro + stages - 1)


class PipelineTrainStep:
    """step(*inputs) -> the batch's loss (every rank gets it): one training
    step of a PipelineCell under pipeline_stages > 1, this rank running its
    stage. `stats` after a step: peak bytes of stashed stage inputs, the
    number of micro-batches in flight at once, the process CPU seconds spent
    in the stage's own graphs (compute_s: not inflated when ranks share
    cores; on an asynchronous device it counts launches, not kernels) and
    the whole step's wall time (step_s)."""

    def __init__(self, pipeline_cell, optimizer):
        from . import communication as comm
        from .nn.pipeline import PipelineCell
        if not isinstance(pipeline_cell, PipelineCell):
            raise TypeError("[pipeline] pipeline_stages > 1 trains an nn.PipelineCell(network, micro_size); got "
                            f"{type(pipeline_cell).__name__}")
        if not comm.is_initialized():
            raise RuntimeError("[pipeline] pipeline_stages > 1 needs spora.communication.init() first")
        self.cell, self.opt = pipeline_cell, optimizer
        self.stages = _parallel.pipeline_stages()
        self.scheduler = _parallel.pipeline_scheduler()
        self.micro = pipeline_cell.micro_size
        size = comm.get_group_size()
        if size % self.stages:
            raise ValueError(f"[pipeline] pipeline_stages={self.stages} does not divide the job's {size} ranks: "
                             f"launch a multiple of {self.stages} ranks (stages x data-parallel replicas)")
        # MindSpore's layout: stage = rank // (ranks per stage); the ranks of
        # one stage are data-parallel replicas of it, replica r of every stage
        # forming pipeline r.
        self.dp = size // self.stages
        if self.micro < self.stages:
            raise ValueError(f"[pipeline] micro_size={self.micro} is below pipeline_stages={self.stages}: some "
                             "stage would have no micro-batch while others work (MindSpore requires micro_size >= "
                             "stages too)")
        if getattr(optimizer, "clip_norm", None) is not None:
            raise ValueError("[pipeline] clip_norm needs the gradient norm over every stage's Parameters; under "
                             "pipeline parallelism it is not supported yet (clip per stage yourself)")
        self.rank = comm.get_rank()
        self.stage, self.replica = divmod(self.rank, self.dp)
        self._comm = comm
        self._dp_comm = None
        if self.dp > 1:  # the replicas of this stage, ordered by replica
            self._dp_comm = comm._comm().split(self.stage, self.replica)
            _comms.append(self._dp_comm)
        self._built = None
        self.report = None  # after the first step: the core's report of this rank's stage
        self.stats = {}

    # -- compile -----------------------------------------------------------------
    def _build(self, micro_inputs):
        from . import _context, _jit, _tree
        leaves, treedef = _tree.flatten((tuple(micro_inputs), {}))
        graph, state, trace = _jit._open(self.cell.network, micro_inputs[0].device)
        _collecting.append([])
        try:
            rec = _jit._record(lambda *a: self.cell.network(*a), state, trace, leaves, treedef)
            marks = _collecting[-1]
        finally:
            _collecting.pop()
            trace.close()
        if rec is None:
            raise RuntimeError("[pipeline] the network's construct has Python control flow on tensor values "
                               f"({trace.untraceable}); a pipelined network must be traceable")
        values, static, out_def, assigned = rec
        if assigned:
            raise ValueError("[pipeline] the network assigns Parameters while it runs (e.g. BatchNorm's running "
                             f"statistics: {', '.join(p.name for p in assigned)}); not supported under pipeline "
                             "parallelism yet")
        flat = [int(x) for m in marks for x in m]
        fwd, bwd, report = graph.pipeline_stage(self.stages, self.stage, flat)
        report = json.loads(report)
        level = _context.get_context("jit_level")
        fwd.optimize(level)
        bwd.optimize(level)
        device = micro_inputs[0].device
        by_name = {state.weight_names[id(p)]: p for p in state.weights}
        params = [by_name[n] for n in report["weights"]]
        index = {id(p): i for i, p in enumerate(self.opt.parameters)}
        for p in params:
            if id(p) not in index:
                raise ValueError(f"[pipeline] Parameter {p.name!r} of stage {self.stage} is not among the "
                                 "optimizer's parameters")
        self.report = report
        self._built = {
            "fwd": fwd.compile(device), "bwd": bwd.compile(device), "report": report, "params": params,
            "slots": [index[id(p)] for p in params],
            "recv": report["recv"], "send": report["send"], "data": report["data_inputs"],
            "update": _jit.JitFunction(lambda grads: self.opt.update_subset(grads)),
        }

    # -- run ---------------------------------------------------------------------
    def _shard(self, x):
        n = x.shape[0]
        if n % self.dp:
            raise ValueError(f"[pipeline] a micro-batch of {n} rows does not split over {self.dp} data-parallel "
                             "replicas: make the batch a multiple of micro_size x replicas")
        b = n // self.dp
        return Tensor(np.ascontiguousarray(x.asnumpy()[self.replica * b:(self.replica + 1) * b]), x.dtype, x.device)

    def _recv(self, metas, peer, only_grad=False):
        from . import _dtype
        out = []
        for m in metas:
            if only_grad and not m["differentiable"]:
                continue
            out.append(self._comm.recv(peer, m["shape"], _dtype.get(m["dtype"])))
        return out

    def __call__(self, *inputs):
        inputs = [x if isinstance(x, Tensor) else Tensor(np.asarray(x)) for x in inputs]
        micro = self.cell.micro_batches(inputs)
        if self.dp > 1:  # each replica takes its block of rows of every micro-batch
            micro = [[self._shard(x) for x in m] for m in micro]
        if self._built is None:
            self._build(micro[0])
        b = self._built
        k, last, first = self.stage, self.stage == self.stages - 1, self.stage == 0
        prev, nxt_rank = self.rank - self.dp, self.rank + self.dp  # this pipeline's neighbours
        weights = b["params"]
        n_dx = sum(1 for m in b["recv"] if m["differentiable"])
        ops = schedule(self.scheduler, k, self.stages, self.micro)
        stash, early, grads, losses = {}, {}, None, []
        in_flight = peak_bytes = 0
        busy = 0.0  # CPU seconds in this stage's own graphs (the rest: waiting on neighbours, sends, the update)
        t_step = time.perf_counter()
        for pos, (kind, i) in enumerate(ops):
            if kind == "F":
                ins = [micro[i][j] for j in b["data"]] + ([] if first else self._recv(b["recv"], prev))
                stash[i] = ins
                in_flight = max(in_flight, len(stash))
                peak_bytes = max(peak_bytes, sum(_nbytes(t) for s in stash.values() for t in s))
                t0 = time.process_time()
                outs = b["fwd"].run(ins + weights)
                busy += time.process_time() - t0
                if last:
                    losses.append(outs[0])
                    continue
                nxt = ops[pos + 1] if pos + 1 < len(ops) else None
                if self.scheduler == "1f1b" and nxt is not None and nxt[0] == "B":
                    early[nxt[1]] = self._recv(b["send"], nxt_rank, only_grad=True)
                for t in outs:
                    self._comm.send(t, nxt_rank)
            else:
                cot = [] if last else (early.pop(i) if i in early else self._recv(b["send"], nxt_rank, only_grad=True))
                t0 = time.process_time()
                outs = b["bwd"].run(stash.pop(i) + cot + weights)
                busy += time.process_time() - t0
                o = 1 if last else 0
                if not first:
                    for t in outs[o:o + n_dx]:
                        self._comm.send(t, prev)
                wg = outs[o + n_dx:]
                grads = wg if grads is None else [a + g for a, g in zip(grads, wg)]
        if self._dp_comm is not None:  # reduced once per step, over this stage's replicas
            from . import ops
            reduced = []
            for g in grads:
                out = ops.zeros_like(g)
                self._dp_comm.all_reduce(g, out, "sum")
                reduced.append(out)
            grads = reduced
        scale = 1.0 / (self.micro * self.dp)
        full = [None] * len(self.opt.parameters)
        for slot, g in zip(b["slots"], grads):
            full[slot] = g * scale if scale != 1.0 else g
        with _parallel.alone():
            b["update"](tuple(full))
        self.stats = {"micro_batches_in_flight": in_flight, "stashed_input_bytes": peak_bytes,
                      "compute_s": busy, "step_s": time.perf_counter() - t_step}
        loss = Tensor(np.array(sum(float(x.asnumpy()) for x in losses) / self.micro, np.float32)) if last else \
            Tensor(np.zeros((), np.float32))
        if self._dp_comm is not None and last:  # the replicas' mean
            out = Tensor(np.zeros((), np.float32))
            self._dp_comm.all_reduce(loss, out, "sum")
            loss = Tensor(np.array(float(out.asnumpy()) / self.dp, np.float32))
        return self._comm.broadcast(loss, root=(self.stages - 1) * self.dp)
