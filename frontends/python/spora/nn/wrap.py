"""nn.TrainOneStepCell: MindSpore's wrapper that turns a network returning
its loss, and an optimizer, into one callable training step."""
from .cell import Cell


class TrainOneStepCell(Cell):
    """train = TrainOneStepCell(net_with_loss, optimizer); loss = train(*inputs)
    runs the forward pass, the gradients of the loss with respect to the
    optimizer's parameters, and the update, and returns the loss (the loss
    before the update). sens: the gradient the loss starts from (MindSpore's
    sensitivity; None or 1.0: the plain gradient), so every gradient is
    scaled by it. In GRAPH_MODE the step compiles as one graph; under
    data-parallel training the gradients are all-reduced first, as
    MindSpore's TrainOneStepCell does."""

    def __init__(self, network, optimizer, sens=None):
        super().__init__(auto_prefix=False)
        from .. import _parallel, amp
        from .distributed import DistributedGradReducer
        self.network = network
        self.optimizer = optimizer
        self.sens = None if sens is None else float(sens)
        net = network if self.sens in (None, 1.0) else _Scaled(network, self.sens)
        reducer = DistributedGradReducer(optimizer.parameters) if _parallel.data_parallel() else None
        object.__setattr__(self, "_step", amp._PlainStep(net, optimizer, reducer))

    def construct(self, *inputs):
        return self._step(*inputs)

    def __call__(self, *inputs):
        # The step compiles itself in GRAPH_MODE (forward, backward and update
        # as one graph); Cell.__call__ must not trace it a second time.
        loss = self._step(*inputs)
        return loss if self.sens in (None, 1.0) else loss / self.sens

    def extend_repr(self):
        return "" if self.sens is None else f"sens={self.sens}"


class _Scaled(Cell):
    """network's loss times sens: its gradients are the gradients times sens."""

    def __init__(self, network, sens):
        super().__init__(auto_prefix=False)
        self.network = network
        self.sens = sens

    def construct(self, *inputs):
        return self.network(*inputs) * self.sens
