"""nn.PipelineCell: a network's batch cut into micro-batches (MindSpore's
PipelineCell; docs/parallel.md, "Pipeline parallelism").

    net.block0.pipeline_stage = 0
    net.block1.pipeline_stage = 1
    spora.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=2,
                                    pipeline_scheduler="1f1b")   # or "gpipe"
    train_net = nn.PipelineCell(nn.WithLossCell(net, loss_fn), micro_size=4)
    Model(train_net, optimizer=opt).train(...)    # or spora.parallel.pipeline_train_step(train_net, opt)

Called directly (one process, any mode) it returns the mean of the wrapped
network's outputs (losses) over the micro-batches: for a mean-reduced loss
that is the whole batch's loss, so pipelined training equals ordinary
training on the same batches. Under pipeline_stages > 1 the training step
runs each stage on its own rank (spora/_pipeline.py).
"""
from .. import ops
from .cell import Cell


class PipelineCell(Cell):
    """network: a Cell returning a scalar loss (e.g. WithLossCell);
    micro_size: how many micro-batches each input's leading (batch) dim is
    cut into (at least pipeline_stages, so that every stage has work)."""

    def __init__(self, network, micro_size):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise TypeError(f"[PipelineCell] network must be a Cell, got {type(network).__name__}")
        if isinstance(micro_size, bool) or not isinstance(micro_size, int) or micro_size < 1:
            raise ValueError(f"[PipelineCell] micro_size must be a positive int, got {micro_size!r}")
        self.network = network
        self.micro_size = micro_size

    def micro_batches(self, inputs):
        """Each input cut along its leading dim into micro_size equal parts:
        a list (per micro-batch) of input lists."""
        m = self.micro_size
        parts = []
        for i, x in enumerate(inputs):
            n = x.shape[0] if len(x.shape) else 0
            if n % m:
                raise ValueError(f"[PipelineCell] input {i} has batch {n}, which micro_size={m} does not divide")
            parts.append(ops.split(x, n // m, axis=0) if m > 1 else (x,))
        return [[p[k] for p in parts] for k in range(m)]

    def construct(self, *inputs):
        total = None
        for micro in self.micro_batches(inputs):
            loss = self.network(*micro)
            total = loss if total is None else total + loss
        return total / self.micro_size if self.micro_size > 1 else total
