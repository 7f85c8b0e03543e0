"""nn.GraphCell: an exported model file as a callable cell (spora.load)."""
import os

import numpy as np

from .. import _C, Tensor
from .cell import Cell


def _open(path, device):
    if not os.path.exists(path):
        raise FileNotFoundError(f"[load] {path}: no such file")
    try:
        return _C.Model(path, device)
    except _C.SporaError:
        from ..serialization import looks_like_spora_file
        if path.lower().endswith(".mindir") and not looks_like_spora_file(path):
            raise ValueError(f"[load] {path} is not a Spora model: a MindIR file written by MindSpore cannot be "
                             f"read by Spora. Export the network with spora.export(net, x, file_name=..., "
                             f"file_format='MINDIR'), or from MindSpore to ONNX and load the .onnx file") from None
        raise


class GraphCell(Cell):
    """Runs a model file written by spora.export (or an ONNX file, imported
    on load) through the C API (spora_model_load / spora_model_run): the
    graph and its stored weights, compiled on the first call. Calling it
    with the graph's inputs returns the outputs (one Tensor, or a tuple when
    there are several). Inputs must have the dtypes and ranks of
    input_types; other sizes (another batch) are planned once per shape.

    graph: a model file's path, or a GraphCell (what spora.load returns:
    MindSpore's nn.GraphCell(mindspore.load(path))), whose compiled model is
    shared (or loaded again from its file when another device is asked for).

    input_types: [(name, dtype, shape)] of the graph's inputs.
    """

    def __init__(self, graph, device=None):
        super().__init__()
        if isinstance(graph, GraphCell):
            path = graph.file_name
            model = graph._model if device is None or device == graph._device else _open(path, device)
        elif isinstance(graph, (str, os.PathLike)):
            path = os.fspath(graph)
            model = _open(path, device)
        else:
            raise TypeError(f"[GraphCell] takes a model file's path or the graph spora.load returned, got "
                            f"{type(graph).__name__}")
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_device", device)
        self.file_name = path
        self.input_types = self._model.inputs()
        self.num_outputs = self._model.num_outputs()

    def construct(self, *inputs):
        if len(inputs) != len(self.input_types):
            raise ValueError(f"[GraphCell] {self.file_name} takes {len(self.input_types)} inputs, got {len(inputs)}")
        tensors = []
        for x, (name, dtype, shape) in zip(inputs, self.input_types):
            t = x if isinstance(x, Tensor) else Tensor(np.asarray(x), dtype=dtype)
            # Other shapes of the same rank (another batch size) are planned by
            # the C API, which names the op that cannot take them.
            if len(t.shape) != len(shape) or t.dtype != dtype:
                raise ValueError(f"[GraphCell] input {name!r} of {self.file_name} must be {dtype.name} "
                                 f"{tuple(shape)} (or another shape of that rank), "
                                 f"got {t.dtype.name} {tuple(t.shape)}")
            tensors.append(t)
        outs = self._model.run(tensors)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __call__(self, *inputs):
        # The model is compiled by the C API already: never trace it again.
        return self.construct(*inputs)

    def get_parameters(self, expand=True):
        return []

    def extend_repr(self):
        return f"file_name={self.file_name!r}"
