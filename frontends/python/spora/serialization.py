"""Checkpoints and exported models (DESIGN §4), over the C API's
spora_checkpoint_* / spora_model_* functions.

Files use the safetensors layout with a CRC-32C per tensor; saving is atomic
(temporary name, fsync, rename), so an interrupted save leaves the previous
file loadable. A missing, truncated or corrupted file raises an exception
naming the file (and the tensor, when one is damaged); nothing is loaded into
a network until every name, shape and dtype has been checked.
"""
import json
import os
from collections import OrderedDict

import numpy as np

from . import _C, Parameter, Tensor


class CheckpointError(ValueError):
    """A checkpoint does not fit the network (names, shapes or dtypes)."""


def _path(file, what):
    if not isinstance(file, (str, os.PathLike)):
        raise TypeError(f"[{what}] file name must be a str or path, got {type(file).__name__}")
    return os.fspath(file)


def _whole(p):
    """A Parameter split by semi_auto_parallel, or an optimizer-state shard,
    as its whole value (gathered: collective, every rank saves), else p
    itself."""
    from . import _spmd, _zero
    if _zero.info(p) is not None:  # an optimizer-state shard (enable_parallel_optimizer)
        return Tensor(_zero.gather(p), p.dtype)
    if _spmd.info(p) is None:
        return p
    return Tensor(_spmd.gather(p), p.dtype)


def _named_tensors(save_obj):
    """(name, Tensor) pairs from a Cell, a list of Parameters, a list of
    {"name", "data"} dicts (MindSpore) or a {name: value} dict."""
    from .nn.cell import Cell
    if isinstance(save_obj, Cell):
        return [(name, _whole(p)) for name, p in save_obj.parameters_and_names()]
    if isinstance(save_obj, dict):
        items = list(save_obj.items())
    elif isinstance(save_obj, (list, tuple)):
        items = []
        for i, x in enumerate(save_obj):
            if isinstance(x, Parameter):
                if not x.name:
                    raise ValueError(f"[save_checkpoint] Parameter {i} has no name")
                items.append((x.name, _whole(x)))
            elif isinstance(x, dict) and "name" in x and "data" in x:
                items.append((x["name"], x["data"]))
            else:
                raise TypeError(f"[save_checkpoint] item {i} must be a named Parameter or a dict with "
                                f"'name' and 'data', got {type(x).__name__}")
    else:
        raise TypeError("[save_checkpoint] save_obj must be a Cell, a list of Parameters or a dict, got "
                        f"{type(save_obj).__name__}")
    out = []
    for name, value in items:
        if not isinstance(name, str) or not name:
            raise ValueError(f"[save_checkpoint] invalid tensor name {name!r}")
        if not isinstance(value, Tensor):
            value = Tensor(np.asarray(value))
        out.append((name, value))
    return out


def save_checkpoint(save_obj, ckpt_file_name, append_dict=None, metadata=None):
    """Writes the parameters of `save_obj` to ckpt_file_name atomically.

    save_obj: a Cell (its parameters_and_names), a list of named Parameters,
    a list of {"name": ..., "data": ...} or a {name: Tensor/array} dict.
    append_dict: extra {name: number/array/Tensor} saved as tensors too.
    metadata: {str: str} stored in the file's header (load_checkpoint_metadata).
    """
    path = _path(ckpt_file_name, "save_checkpoint")
    pairs = _named_tensors(save_obj)
    for k, v in (append_dict or {}).items():
        pairs.append((k, v if isinstance(v, Tensor) else Tensor(np.asarray(v))))
    names = [n for n, _ in pairs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"[save_checkpoint] duplicate tensor names {sorted(dup)}")
    meta = None
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("[save_checkpoint] metadata must map str to str")
    plan = _parallel_plan(save_obj)
    if plan is not None:  # the plan travels with the weights (load_checkpoint_metadata(...)["parallel_plan"])
        metadata = dict(metadata or {}, parallel_plan=plan)
    if metadata:
        meta = json.dumps(metadata)
    _C.checkpoint_save(path, names, [t for _, t in pairs], meta)


def _parallel_plan(save_obj):
    """The partition plan (JSON text) of a Cell trained under
    semi_auto_parallel / auto_parallel, or None."""
    from . import _parallel, _spmd
    if not _parallel.semi_auto() or not hasattr(save_obj, "trainable_params"):
        return None
    try:
        plan = _spmd.plan_of(save_obj)
    except ValueError:
        return None
    return json.dumps(plan)


def looks_like_spora_file(path):
    """Spora's checkpoints and model files start with the 8-byte length of a
    JSON header (the safetensors layout), so their ninth byte is '{'."""
    with open(path, "rb") as f:
        head = f.read(9)
    return len(head) == 9 and head[8:9] == b"{"


def _not_a_checkpoint(path, what):
    return _C.SporaValueError(
        f"[{what}] {path} is not a Spora checkpoint; a MindSpore .ckpt (protobuf) cannot be read by Spora. In "
        f"MindSpore, save the values as NumPy: np.savez('weights.npz', **{{n: p.asnumpy() for n, p in "
        f"mindspore.load_checkpoint(path).items()}}); then here: spora.load_param_into_net(net, "
        f"dict(np.load('weights.npz')))")


def _read(path, what):
    path = _path(path, what)
    if not os.path.exists(path):
        raise FileNotFoundError(f"[{what}] {path}: no such file")
    try:
        return _C.checkpoint_load(path)
    except _C.SporaError:
        if not looks_like_spora_file(path):
            raise _not_a_checkpoint(path, what) from None
        raise


def load_checkpoint(ckpt_file_name, net=None, strict_load=True, filter_prefix=None, choice_func=None):
    """Reads every tensor of a checkpoint (CRC-checked) into an ordered
    {name: Parameter}. With net, also loads them into it (load_param_into_net
    with strict_load). filter_prefix: a str or tuple of prefixes to skip;
    choice_func(name) -> bool keeps only the names it accepts."""
    entries, _ = _read(ckpt_file_name, "load_checkpoint")
    if isinstance(filter_prefix, str):
        filter_prefix = (filter_prefix,)
    out = OrderedDict()
    for name, t in entries:
        if filter_prefix and name.startswith(tuple(filter_prefix)):
            continue
        if choice_func is not None and not choice_func(name):
            continue
        out[name] = Parameter(t, name=name, requires_grad=t.dtype.name in ("float32", "float64", "float16",
                                                                           "bfloat16"))
    if net is not None:
        load_param_into_net(net, out, strict_load=strict_load)
    return out


def load_checkpoint_metadata(ckpt_file_name):
    """The {str: str} metadata saved with a checkpoint."""
    path = _path(ckpt_file_name, "load_checkpoint")
    if not os.path.exists(path):
        raise FileNotFoundError(f"[load_checkpoint] {path}: no such file")
    try:
        return json.loads(_C.checkpoint_metadata(path))
    except _C.SporaError:
        if not looks_like_spora_file(path):
            raise _not_a_checkpoint(path, "load_checkpoint") from None
        raise


def load_param_into_net(net, parameter_dict, strict_load=True):
    """Copies parameter_dict's values into net's Parameters of the same names.

    Everything is checked before anything is written: a shape or dtype that
    differs is always an error; with strict_load (the default) a net
    parameter missing from the dict, or a dict entry the net does not have,
    is an error too. Returns (net params not loaded, dict names not used) --
    both empty under strict_load.
    """
    from . import _zero
    from .nn.cell import Cell
    if not isinstance(net, Cell):
        raise TypeError(f"[load_param_into_net] net must be an nn.Cell, got {type(net).__name__}")
    if not isinstance(parameter_dict, dict):
        raise TypeError(f"[load_param_into_net] parameter_dict must be a dict, got {type(parameter_dict).__name__}")
    net_params = OrderedDict(net.parameters_and_names())
    missing = [n for n in net_params if n not in parameter_dict]
    unused = [n for n in parameter_dict if n not in net_params]
    problems = []
    if strict_load and missing:
        problems.append(f"missing from the checkpoint: {', '.join(missing)}")
    if strict_load and unused:
        problems.append(f"not in the network: {', '.join(unused)}")
    plan = []
    for name, p in net_params.items():
        if name not in parameter_dict:
            continue
        v = parameter_dict[name]
        if not isinstance(v, Tensor):
            v = Tensor(np.asarray(v))
        shape = _zero.whole_shape(p)  # an optimizer-state shard loads from its whole value
        if tuple(v.shape) != shape:
            problems.append(f"{name}: checkpoint shape {tuple(v.shape)}, network shape {shape}")
        elif v.dtype != p.dtype:
            problems.append(f"{name}: checkpoint dtype {v.dtype.name}, network dtype {p.dtype.name}")
        else:
            plan.append((p, _zero.local_block(p, v)))
    if problems:
        raise CheckpointError("[load_param_into_net] the checkpoint does not fit the network; nothing was "
                              "loaded:\n  " + "\n  ".join(problems))
    for p, v in plan:
        p.set_data(v)
    return missing, unused


# -- export / load --------------------------------------------------------------


# file_format -> the extension added to a file_name that has none. Both
# write Spora's model file: "MINDIR" keeps MindSpore's file name, so that
# export(..., file_name="model", file_format="MINDIR") and then
# load("model.mindir") work as in MindSpore; the file is not MindSpore's
# protobuf MindIR, and MindSpore cannot read it.
_EXPORT_EXTENSIONS = {"SPORA": ".spora", "MINDIR": ".mindir"}


def export(net, *inputs, file_name, file_format="SPORA", dynamic_batch=False):
    """Traces net.construct on example `inputs` (in eval mode) into a graph
    whose weights are the net's Parameters, and saves graph and weights to
    file_name in Spora's model format. file_format "SPORA" (the default)
    adds ".spora" to a file_name without an extension, "MINDIR" adds
    ".mindir" (MindSpore's name; the contents are Spora's format, which
    MindSpore cannot read). The file runs with spora.load, or from C with
    spora_model_load / spora_model_run. Returns the path written.

    file_format "ONNX" writes an ONNX model instead (ai.onnx opset 17,
    ".onnx" added), for onnxruntime and other ONNX tools; dynamic_batch=True
    makes dimension 0 of the inputs the symbolic "batch" (docs/onnx.md)."""
    from ._jit import JitFunction
    from .nn.cell import Cell
    fmt = str(file_format).upper()
    if fmt not in _EXPORT_EXTENSIONS and fmt != "ONNX":
        raise ValueError(f"[export] file_format {file_format!r} is not supported: Spora writes its own model "
                         f"format, as file_format='SPORA' (model.spora) or 'MINDIR' (the same format named "
                         f"model.mindir, which spora.load reads), or 'ONNX' (model.onnx, for other runtimes)")
    if not isinstance(net, Cell):
        raise TypeError(f"[export] net must be an nn.Cell, got {type(net).__name__}")
    if not inputs:
        raise ValueError("[export] give example inputs: spora.export(net, x, file_name=...)")
    path = _path(file_name, "export")
    if not os.path.splitext(path)[1]:
        path += ".onnx" if fmt == "ONNX" else _EXPORT_EXTENSIONS[fmt]
    inputs = tuple(x if isinstance(x, Tensor) else Tensor(np.asarray(x)) for x in inputs)
    was_training = net.training
    net.set_train(False)
    try:
        for _ in net.parameters_and_names():  # names the weights are stored under
            pass
        fn = JitFunction(net.construct)
        fn(*inputs)
        (entry,) = fn._cache.values()
        if entry.assigned:
            raise ValueError("[export] construct assigns Parameters in eval mode; an exported model must "
                             "be a pure function of its inputs")
        graph_json = fn.last_graph.json()
        weights = list(entry.weights)
    finally:
        net.set_train(was_training)
    if fmt == "ONNX":
        _C.model_export_onnx(path, graph_json, weights, bool(dynamic_batch))
    else:
        _C.model_save(path, graph_json, weights)
    return path


def load(file_name, device=None):
    """Loads a model written by spora.export (.spora, or .mindir under
    file_format="MINDIR") or an ONNX file (.onnx, imported by the C API) as
    a callable nn.GraphCell; nn.GraphCell(spora.load(...)) is the same cell,
    as in MindSpore. A MindIR file written by MindSpore is refused with what
    to do instead."""
    from .nn.graph_cell import GraphCell
    return GraphCell(file_name, device=device)
