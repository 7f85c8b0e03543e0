"""Optimizer base: parameter groups, learning rate, weight decay, gradient
clipping by global norm, and the fused update ops (docs/ops-optim.md).

One step of one parameter group is one fused op (sgd_update / adam_update)
over the whole group (split into chunks only past the op's 64-tensor
limit). Hyper-parameters that change -- the learning rate and the step
count -- are scalar tensors: in a compiled training step they are graph
weights or values computed in the graph from global_step, so an LR schedule
never causes a recompilation.
"""
import math

import numpy as np

from ... import Parameter, Tensor, _zero, float32, float64
from ...ops import raw
from .. import _util
from ..cell import Cell
from .lr_schedule import LearningRateSchedule, as_schedule

_MAX_OP_INPUTS = 64


def _scalar_dtype(param_dtype):
    return np.float64 if param_dtype.name == "float64" else np.float32


def _state_dtype(param_dtype):
    return np.float32 if param_dtype.name in ("float16", "bfloat16") else _util.np_dtype(param_dtype)


def _global_norm(grads):
    """The L2 norm of all of grads (global_norm in chunks within the op's limit)."""
    norms = []
    for lo in range(0, len(grads), _MAX_OP_INPUTS):
        norms.append(raw.global_norm(*grads[lo:lo + _MAX_OP_INPUTS]))
    if len(norms) == 1:
        return norms[0]
    total = norms[0] * norms[0]
    for n in norms[1:]:
        total = total + n * n
    return raw.sqrt(total)


class _Group:
    __slots__ = ("params", "lr", "lr_param", "weight_decay", "index")


class Optimizer(Cell):
    """Base class of SGD, Momentum, Adam, AdamW.

    params: an iterable of Parameters, or of dicts {"params": [...],
    "lr": ..., "weight_decay": ...} (groups; keys missing in a group take the
    optimizer's values). learning_rate: a float (kept in the Parameter
    `learning_rate`: set_learning_rate changes it without recompiling) or an
    LR schedule (spora.nn.StepLR, CosineDecayLR, WarmupLR, or any callable of
    the step that accepts scalar Tensors). clip_norm: clip all gradients
    together to this global L2 norm (PyTorch's clip_grad_norm_) before the
    update, folded into the update op's grad_scale.

    Calling the optimizer with the gradients (in self.parameters' order)
    applies one step: optimizer(grads).
    """

    # subclasses: state names per parameter, and the per-call tensor limit
    _state_names = ()

    def __init__(self, params, learning_rate, weight_decay=0.0, clip_norm=None):
        super().__init__(auto_prefix=False)
        groups = self._parse_groups(params, learning_rate, weight_decay)
        if clip_norm is not None:
            clip_norm = float(clip_norm)
            if not math.isfinite(clip_norm) or clip_norm <= 0:
                raise ValueError(f"[{type(self).__name__}] clip_norm must be a positive number, got {clip_norm}")
        self.clip_norm = clip_norm
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "parameters", tuple(p for g in groups for p in g.params))
        self.global_step = Parameter(Tensor(np.array(0, np.float32)), name="global_step", requires_grad=False)
        self._states = {}  # state name -> list of Parameters, aligned with self.parameters
        # enable_parallel_optimizer: this rank's blocks of the state (spora._zero)
        object.__setattr__(self, "_zero", _zero.sharding_for(self, self.parameters))
        # ... or, under semi_auto/auto_parallel, the mesh axis the SPMD pass
        # splits the state over (the update ops' shard_axis attribute).
        object.__setattr__(self, "_spmd_shard_axis", _zero.spmd_shard_axis())
        for k, name in enumerate(self._state_names):
            self._states[name] = []
            for i, p in enumerate(self.parameters):
                # A Parameter declared without data (no_init_parameters)
                # gets its state declared too: zeros once init_data() runs.
                if self._zero is not None:
                    value = _zero.state_value(self._zero, i, _state_dtype(p.dtype))
                elif p._meta:
                    value = Tensor(shape=p.shape, dtype=_state_dtype(p.dtype), init="zeros")
                else:
                    value = Tensor(np.zeros(p.shape, _state_dtype(p.dtype)))
                s = Parameter(value, name=f"{name}.{p.name}", requires_grad=False)
                if self._zero is not None:
                    _zero.tag_state(self._zero, i, s)
                self.insert_param_to_cell(f"_{name}_{i}", s)
                self._states[name].append(s)
        self._lr_params()

    def _parse_groups(self, params, learning_rate, weight_decay):
        name = type(self).__name__
        if isinstance(params, Parameter):
            params = [params]
        params = list(params)
        if not params:
            raise ValueError(f"[{name}] got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        groups, seen = [], set()
        for gi, spec in enumerate(params):
            if not isinstance(spec, dict) or "params" not in spec:
                raise TypeError(f"[{name}] parameter group {gi} must be a dict with 'params'")
            unknown = set(spec) - {"params", "lr", "learning_rate", "weight_decay"}
            if unknown:
                raise ValueError(f"[{name}] parameter group {gi}: unknown keys {sorted(unknown)}")
            g = _Group()
            g.index = gi
            g.params = list(spec["params"])
            if not g.params:
                raise ValueError(f"[{name}] parameter group {gi} is empty")
            for p in g.params:
                if not isinstance(p, Parameter):
                    raise TypeError(f"[{name}] parameter group {gi} holds a {type(p).__name__}, not a Parameter")
                if not p.requires_grad:
                    raise ValueError(f"[{name}] parameter {p.name!r} has requires_grad=False; pass "
                                     "net.trainable_params()")
                if p.dtype.name not in ("float32", "float64", "float16", "bfloat16"):
                    raise TypeError(f"[{name}] parameter {p.name!r} is {p.dtype.name}; only float parameters train")
                if id(p) in seen:
                    raise ValueError(f"[{name}] parameter {p.name!r} appears twice")
                seen.add(id(p))
            lr = spec.get("lr", spec.get("learning_rate", learning_rate))
            wd = float(spec.get("weight_decay", weight_decay))
            if not math.isfinite(wd) or wd < 0:
                raise ValueError(f"[{name}] weight_decay must be >= 0, got {wd}")
            g.weight_decay = wd
            g.lr = as_schedule(lr)
            g.lr_param = None
            groups.append(g)
        return groups

    def _lr_params(self):
        """Constant learning rates live in Parameters (one per group)."""
        for g in self.groups:
            from .lr_schedule import ConstantLR
            if type(g.lr) is ConstantLR:
                # In the group's scalar dtype, so f64 parameters see the exact rate.
                p = Parameter(Tensor(np.array(g.lr.learning_rate, _scalar_dtype(g.params[0].dtype))),
                              name="learning_rate" if len(self.groups) == 1 else f"learning_rate_{g.index}",
                              requires_grad=False)
                self.insert_param_to_cell(f"_lr_{g.index}", p)
                g.lr_param = p

    def set_learning_rate(self, value, group=None):
        """Sets a constant learning rate (all groups, or group index `group`)."""
        for g in self.groups:
            if group is not None and g.index != group:
                continue
            if g.lr_param is None:
                raise ValueError(f"[{type(self).__name__}] group {g.index} follows a schedule; its rate is "
                                 "computed from global_step")
            g.lr_param.set_data(Tensor(np.array(float(value), _scalar_dtype(g.params[0].dtype))))

    def get_lr(self, group=0):
        """The learning rate the next step of `group` uses, as a float."""
        g = self.groups[group]
        if g.lr_param is not None:
            return float(g.lr_param.asnumpy())
        return float(g.lr(int(self.global_step.asnumpy())))

    # -- the step -----------------------------------------------------------
    def _scalar(self, value, dtype):
        """value (a number or a scalar Tensor) as a scalar Tensor of numpy dtype `dtype`."""
        if isinstance(value, Tensor):
            want = float64 if dtype == np.float64 else float32
            return value if value.dtype == want else value.astype(want)
        return Tensor(np.array(value, dtype))

    def _group_lr(self, g, step_before, dtype):
        lr = g.lr_param if g.lr_param is not None else g.lr(step_before)
        return self._scalar(lr, dtype)

    def _grad_scale(self, grads):
        """min(1, clip_norm / (norm + 1e-6)) over all gradients (chunked global_norm)."""
        if self.clip_norm is None:
            return None
        norm = _global_norm(grads) if self._zero is None else self._zero.global_norm(grads, _global_norm)
        return raw.minimum(self.clip_norm / (norm + 1e-6), 1.0)

    def construct(self, grads):
        return self._step(grads, False)

    def update_subset(self, grads):
        """One step for the parameters whose gradient is given; those whose
        gradient is None keep their values and state (a pipeline stage owns
        only its own parameters). global_step advances once. Not with
        clip_norm (the norm would miss the others' gradients)."""
        if self.clip_norm is not None:
            raise ValueError(f"[{type(self).__name__}] update_subset cannot clip by the global norm: the "
                             "parameters without a gradient here would be missing from it")
        if self._zero is not None:
            raise ValueError(f"[{type(self).__name__}] update_subset is not implemented with "
                             "enable_parallel_optimizer")
        return self._step(grads, True)

    def _step(self, grads, subset):
        grads = tuple(grads)
        if len(grads) != len(self.parameters):
            raise ValueError(f"[{type(self).__name__}] got {len(grads)} gradients for {len(self.parameters)} "
                             f"parameters{_util._C_location()}")
        for p, g in zip(self.parameters, grads):
            if g is None and subset:
                continue
            if g is None:
                raise ValueError(f"[{type(self).__name__}] no gradient for parameter {p.name!r}")
            if tuple(g.shape) != tuple(p.shape) and self._zero is None:
                raise ValueError(f"[{type(self).__name__}] gradient of {p.name!r} has shape {tuple(g.shape)}, "
                                 f"the parameter {tuple(p.shape)}{_util._C_location()}")
        params = self.parameters
        if self._zero is not None:  # this rank's blocks of the sharded parameters (spora._zero)
            grads = tuple(self._zero.local_grads(params, grads, type(self).__name__))
            params = tuple(self._zero.block(p, i) if s else p for i, (p, s) in enumerate(zip(params,
                                                                                           self._zero.sharded)))
            object.__setattr__(self, "_new_blocks", {})
        step_before = self.global_step
        step = step_before + 1.0
        scale = self._grad_scale(grads)
        offset = 0
        for g in self.groups:
            n = len(g.params)
            # The ops take one dtype per call: split a mixed group by dtype,
            # then into chunks within the op's tensor limit.
            by_dtype = {}
            for i in range(offset, offset + n):
                if grads[i] is not None:
                    by_dtype.setdefault(self.parameters[i].dtype.name, []).append(i)
            offset += n
            for idx in by_dtype.values():
                dtype = _scalar_dtype(self.parameters[idx[0]].dtype)
                lr = self._group_lr(g, step_before, dtype)
                gs = self._scalar(1.0 if scale is None else scale, dtype)
                for lo in range(0, len(idx), self._chunk):
                    chunk = idx[lo:lo + self._chunk]
                    object.__setattr__(self, "_chunk_pos", chunk)
                    self._update(g, lr, step, gs, [params[i] for i in chunk], [grads[i] for i in chunk],
                                 {k: [v[i] for i in chunk] for k, v in self._states.items()})
        if self._zero is not None:
            self._zero.gather_params(self.parameters, self._new_blocks)
        self.global_step.assign_value(step)
        return True

    def _update(self, group, lr, step, grad_scale, params, grads, states):
        raise NotImplementedError

    def _write(self, params, states, outs):
        """Assigns the op's outputs: new params, then each state role."""
        n = len(params)
        for i, p in enumerate(params):
            if isinstance(p, Parameter):
                p.assign_value(outs[i])
            else:  # a block of a sharded parameter: all-gathered after the step
                self._new_blocks[self._chunk_pos[i]] = outs[i]
        for k, name in enumerate(self._state_names):
            for i, s in enumerate(states[name]):
                s.assign_value(outs[(k + 1) * n + i])
