"""nn.Cell: the building block of networks (MindSpore's Cell, PyTorch's Module).

A Cell holds Parameters and sub-Cells as attributes; assigning one registers
it (in assignment order). construct() is the forward computation; calling the
cell runs it eagerly in PYNATIVE_MODE and through spora.jit in GRAPH_MODE,
compiled once per input signature and training phase.

Parameter names: a Parameter created without a name takes its attribute path
in the network ("conv1.weight", "layers.0.bias"), assigned when the network's
parameters are enumerated; checkpoints and exported models use these names.
"""
from collections import OrderedDict

from .. import Parameter
from .. import _parallel
from . import _amp, _util


class Cell:
    """Base class of every layer and network. Subclasses implement construct()."""

    def __init__(self, auto_prefix=True):
        object.__setattr__(self, "_params", OrderedDict())
        object.__setattr__(self, "_cells", OrderedDict())
        object.__setattr__(self, "_auto_names", set())
        object.__setattr__(self, "training", False)
        object.__setattr__(self, "_graph_fns", {})
        # auto_prefix=False: children's parameters are named as if they sat
        # in this cell's parent (wrappers such as WithLossCell keep the
        # backbone's names, so its checkpoints load into the bare network).
        object.__setattr__(self, "_auto_prefix", bool(auto_prefix))
        # Mixed precision (spora.amp): the dtype to_float asked for, the one
        # auto_mixed_precision chose, and the dtype this cell is running in
        # right now (Parameters read inside construct are cast to it).
        object.__setattr__(self, "_amp_dtype", None)
        object.__setattr__(self, "_amp_auto", None)
        object.__setattr__(self, "_amp_active", None)

    # -- registration -------------------------------------------------------
    def _check_init(self, what):
        if "_params" not in self.__dict__:
            raise RuntimeError(f"[Cell] {type(self).__name__}: call super().__init__() before "
                               f"assigning {what}")

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._check_init(f"Parameter {name!r}")
            self._cells.pop(name, None)
            self.__dict__.pop(name, None)
            self._params[name] = value
            if value.name is None or value.name == "" or name in self._auto_names \
                    or value.name == name or _util.is_default_name(value.name):
                self._auto_names.add(name)
                _util.set_name(value, name)
            else:
                self._auto_names.discard(name)
        elif isinstance(value, Cell):
            self._check_init(f"Cell {name!r}")
            self._params.pop(name, None)
            self.__dict__.pop(name, None)
            self._cells[name] = value
        else:
            if "_params" in self.__dict__:
                if name in self._params:
                    if value is None:
                        del self._params[name]
                    else:
                        raise TypeError(f"[Cell] {type(self).__name__}.{name} is a Parameter; assign a "
                                        f"Parameter (or use .set_data to change its value), got "
                                        f"{type(value).__name__}")
                self._cells.pop(name, None)
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: Parameters and Cells live in
        # the registries, not in __dict__, so there is one place to enumerate.
        d = self.__dict__
        if "_params" in d and name in d["_params"]:
            p = d["_params"][name]
            if d.get("_amp_active") is not None:
                return _amp.param_view(p, d["_amp_active"])
            return p
        if "_cells" in d and name in d["_cells"]:
            return d["_cells"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._params:
            del self._params[name]
        elif name in self._cells:
            del self._cells[name]
        else:
            object.__delattr__(self, name)

    def insert_param_to_cell(self, param_name, param, check_name=True):
        """Register `param` under `param_name` (MindSpore's explicit form of setattr)."""
        if not isinstance(param, Parameter):
            raise TypeError(f"[Cell] insert_param_to_cell: {param_name!r} is not a Parameter")
        if check_name and ("." in param_name or not param_name):
            raise ValueError(f"[Cell] insert_param_to_cell: invalid name {param_name!r}")
        if check_name and (param_name in self._cells or
                           (param_name in self.__dict__ and param_name not in self._params)):
            raise KeyError(f"[Cell] insert_param_to_cell: {param_name!r} already names an attribute")
        setattr(self, param_name, param)

    def insert_child_to_cell(self, child_name, child_cell):
        if not isinstance(child_cell, Cell):
            raise TypeError(f"[Cell] insert_child_to_cell: {child_name!r} is not a Cell")
        setattr(self, child_name, child_cell)

    # -- enumeration --------------------------------------------------------
    def cells_and_names(self, cells=None, name_prefix=""):
        """(path, cell) for this cell and every descendant, each cell once."""
        seen = set() if cells is None else cells
        if id(self) in seen:
            return
        seen.add(id(self))
        yield name_prefix, self
        for name, cell in self._cells.items():
            if cell is None:
                continue
            if self._auto_prefix:
                path = f"{name_prefix}.{name}" if name_prefix else name
            else:
                path = name_prefix
            yield from cell.cells_and_names(seen, path)

    def name_cells(self):
        """Direct children as an ordered {name: cell}."""
        return OrderedDict(self._cells)

    def cells(self):
        return list(self._cells.values())

    def parameters_and_names(self, name_prefix="", expand=True):
        """(full name, Parameter) for every Parameter, shared ones once.

        Auto-named Parameters get their path as .name here, so what a
        checkpoint stores matches what this yields.
        """
        seen = set()
        cells = self.cells_and_names(name_prefix=name_prefix) if expand else [(name_prefix, self)]
        for prefix, cell in cells:
            for attr, p in cell._params.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                path = f"{prefix}.{attr}" if prefix else attr
                if attr in cell._auto_names:
                    _util.set_name(p, path)
                yield p.name, p

    def get_parameters(self, expand=True):
        """Every Parameter (trainable or not), in registration order."""
        return [p for _, p in self.parameters_and_names(expand=expand)]

    def trainable_params(self, recurse=True):
        return [p for p in self.get_parameters(expand=recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        return [p for p in self.get_parameters(expand=recurse) if not p.requires_grad]

    def init_parameters_data(self):
        """Materialises every Parameter declared without data (under
        spora.nn.utils.no_init_parameters) in declaration order, so the
        values equal eager construction's from the same seed. Returns those
        Parameters."""
        from .._parameter import init_parameters
        draws = [d for _, c in self.cells_and_names() for d in c.__dict__.get("_deferred_draws", ())]
        return init_parameters(self.get_parameters(), draws)

    def parameters_dict(self):
        """{name: Parameter} (an OrderedDict)."""
        return OrderedDict(self.parameters_and_names())

    # PyTorch spellings, for users coming from there.
    def parameters(self):
        return self.get_parameters()

    def named_parameters(self):
        return self.parameters_and_names()

    # -- phase --------------------------------------------------------------
    def set_train(self, mode=True):
        """Training mode (Dropout drops, BatchNorm uses and updates batch
        statistics) for this cell and every descendant; returns self."""
        for _, c in self.cells_and_names():
            object.__setattr__(c, "training", bool(mode))
        return self

    def set_grad(self, requires_grad=True):
        """Accepted for MindSpore programs; returns self. MindSpore's
        PyNative mode must be told which cells to record for backward;
        Spora's spora.grad / value_and_grad record what they differentiate
        on their own, so there is nothing to mark."""
        return self

    def train(self, mode=True):
        return self.set_train(mode)

    def eval(self):
        return self.set_train(False)

    # -- running ------------------------------------------------------------
    def construct(self, *inputs, **kwargs):
        raise NotImplementedError(f"[Cell] {type(self).__name__} does not implement construct()")

    def to_float(self, dst_type):
        """Runs this cell and every descendant in `dst_type` (spora.float16,
        spora.bfloat16, or spora.float32 to keep a sub-cell in f32 inside a
        low-precision network): floating inputs are cast to it on entry and
        trainable floating Parameters are read as casts of themselves (the
        Parameters stay f32, the master copies the optimizer updates, and
        their gradients arrive in f32). Floating outputs are cast back to
        the dtype the cell was called with, so the rest of the network sees
        the dtype it expects. Returns self."""
        dt = _amp.check_dtype(dst_type, "Cell.to_float", allow_f32=True)
        for _, c in self.cells_and_names():
            object.__setattr__(c, "_amp_dtype", dt)
        return self

    def shard(self, in_strategy, out_strategy=None):
        """Semi-automatic parallelism (docs/parallel.md): lays the cell's
        inputs out as in_strategy (one tuple per input, like
        Primitive.shard) and, if given, its outputs as out_strategy; ops
        inside follow by sharding propagation. Returns self."""
        from .._primitive import strategy_string
        ins = [strategy_string((s,), "Cell.shard") for s in in_strategy]
        outs = None if out_strategy is None else [strategy_string((s,), "Cell.shard") for s in out_strategy]
        self.__dict__["_spmd_shard"] = (ins, outs)
        return self

    def recompute(self, **kwargs):
        """Recomputation (MindSpore's Cell.recompute; docs/parallel.md):
        in graph mode the backward pass computes the ops of this cell and its
        sub-cells again instead of keeping their forward outputs, except the
        cell's own outputs, which stay (a Primitive's recompute(False) keeps
        that op's too). Gradients do not change; the compiled step's planned
        memory drops. Keyword arguments: MindSpore's mp_comm_recompute,
        parallel_optimizer_comm_recompute and recompute_slice_activation
        (bools); communication ops are never recomputed here."""
        from .._recompute import cell_options
        self.__dict__["_recompute"] = cell_options(kwargs)

    def _sharded_construct(self, *args):
        from .._tensor import _call
        ins, outs = self.__dict__["_spmd_shard"]
        if len(ins) != len(args):
            raise ValueError(f"[Cell.shard] {type(self).__name__} takes {len(args)} inputs but in_strategy has "
                             f"{len(ins)}")
        # An identity (a reshape to the same shape) whose strategy the SPMD
        # pass honours: the value is redistributed to that layout there.
        def constrain(x, st):
            return _call("reshape", [x], shape=list(x.shape), strategy=st)
        out = self.construct(*[constrain(x, st) for x, st in zip(args, ins)])
        if outs is None:
            return out
        single = not isinstance(out, (tuple, list))
        res = [constrain(x, st) for x, st in zip([out] if single else out, outs)]
        return res[0] if single else type(out)(res)

    def _check_not_split(self):
        """An eager call cannot use Parameters that hold only this rank's
        block (semi_auto_parallel): it would compute on the block as if it
        were the whole tensor."""
        from .. import _spmd
        for p in self.get_parameters():
            if _spmd.info(p) is not None:
                raise RuntimeError(f"[parallel] {type(self).__name__}: Parameter {p.name!r} holds only this rank's "
                                   f"block of {p.shape} (semi_auto_parallel); run the cell compiled "
                                   "(set_context(mode=GRAPH_MODE) or inside spora.jit)")

    @property
    def pipeline_stage(self):
        """The pipeline stage this cell's ops run in (MindSpore's
        Cell.pipeline_stage; None: the stage of what they read). Used when
        an nn.PipelineCell trains under pipeline_stages > 1."""
        return self.__dict__.get("_pipeline_stage")

    @pipeline_stage.setter
    def pipeline_stage(self, stage):
        if isinstance(stage, bool) or not isinstance(stage, int) or stage < 0:
            raise ValueError(f"[Cell] pipeline_stage must be an int >= 0, got {stage!r}")
        self.__dict__["_pipeline_stage"] = stage

    # -- forward hooks (MindSpore 2.x / PyTorch) ------------------------------
    def register_forward_pre_hook(self, hook_fn):
        """hook_fn(cell, inputs) runs before construct, with the positional
        inputs as a tuple; returning a tuple (or one value) replaces them.
        Returns a handle whose remove() unregisters it. Under spora.jit the
        hook is traced with the rest: tensor ops in it become graph ops, and
        one that needs values (printing them, asnumpy) makes that function
        run eagerly (JitFallbackWarning)."""
        return _HookHandle(self, "_pre_hooks", hook_fn)

    def register_forward_hook(self, hook_fn):
        """hook_fn(cell, inputs, output) runs after construct; returning
        something other than None replaces the output. Returns a handle with
        remove(). Traced under spora.jit as register_forward_pre_hook says."""
        return _HookHandle(self, "_fwd_hooks", hook_fn)

    def _call_hooked(self, args, kwargs):
        d = self.__dict__
        for fn in list(d.get("_pre_hooks", {}).values()):
            new = fn(self, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        # The call itself, without hooks (so __call__ stays one dict lookup
        # longer than it was for cells that have none; a cell calling itself
        # inside its own construct runs the inner call without hooks).
        d["_hooks_on"] = False
        try:
            out = self(*args, **kwargs)
        finally:
            d["_hooks_on"] = bool(d.get("_pre_hooks") or d.get("_fwd_hooks"))
        for fn in list(d.get("_fwd_hooks", {}).values()):
            new = fn(self, args, out)
            if new is not None:
                out = new
        return out

    def __call__(self, *args, **kwargs):
        if self.__dict__.get("_hooks_on"):
            return self._call_hooked(args, kwargs)
        if "_pipeline_stage" in self.__dict__ and _util.is_tracing():
            from .. import _pipeline
            if _pipeline.collecting():
                return _pipeline.call_staged(self, args, kwargs)
        if "_recompute" in self.__dict__ and _util.is_tracing():
            from .._recompute import call_marked
            return call_marked(self, args, kwargs)
        if not _util.is_tracing() and not _util.graph_mode() and _parallel.semi_auto():
            self._check_not_split()
        if "_spmd_shard" in self.__dict__ and not kwargs and (not _util.graph_mode() or _util.is_tracing()):
            return self._sharded_construct(*args)
        if kwargs or not _util.graph_mode() or _util.is_tracing():
            if self._amp_dtype is None and self._amp_auto is None:
                return self.construct(*args, **kwargs)
            return _amp.call(self, args, kwargs)
        return self._graph_call(args)

    def _amp_construct(self, *args):
        return _amp.call(self, args, {})

    def _graph_call(self, args):
        # One compiled function per training phase of the whole tree (the
        # phase changes what construct traces: dropout, batch statistics)
        # and mixed-precision setting; the jit object itself caches by input
        # signature.
        # Forward hooks are traced into the graph, so adding or removing one
        # changes what construct traces too.
        phase = tuple((c.training, c._amp_dtype, c._amp_auto, tuple(c.__dict__.get("_pre_hooks", ())),
                       tuple(c.__dict__.get("_fwd_hooks", ()))) for _, c in self.cells_and_names())
        fn = self._graph_fns.get(phase)
        if fn is None:
            amp = self._amp_dtype is not None or self._amp_auto is not None
            body = self._sharded_construct if "_spmd_shard" in self.__dict__ else self.construct
            fn = _util.jit(self._amp_construct if amp else body)
            self._graph_fns[phase] = fn
        _util.before_graph_run(self)
        return fn(*args)

    # -- repr ---------------------------------------------------------------
    def extend_repr(self):
        """One line of constructor arguments shown in repr()."""
        return ""

    def __repr__(self):
        head = f"{type(self).__name__}<{self.extend_repr()}>" if self.extend_repr() else type(self).__name__
        if not self._cells:
            return head
        lines = [head + " ("]
        for name, cell in self._cells.items():
            sub = repr(cell).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        lines.append(")")
        return "\n".join(lines)


class _HookHandle:
    """What register_forward_(pre_)hook returns: remove() unregisters the hook."""
    _next = [0]

    def __init__(self, cell, where, fn):
        if not callable(fn):
            raise TypeError(f"[Cell] a hook must be callable, got {type(fn).__name__}")
        _HookHandle._next[0] += 1
        self.id = _HookHandle._next[0]
        self._cell_dict = cell.__dict__
        self._hooks = cell.__dict__.setdefault(where, {})
        self._hooks[self.id] = fn
        self._cell_dict["_hooks_on"] = True

    def remove(self):
        self._hooks.pop(self.id, None)
        d = self._cell_dict
        d["_hooks_on"] = bool(d.get("_pre_hooks") or d.get("_fwd_hooks"))


class SequentialCell(Cell):
    """Cells applied in order; built from a list or an OrderedDict of named cells."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for name, cell in args[0].items():
                self._append(name, cell)
        else:
            for i, cell in enumerate(args):
                self._append(str(i), cell)

    def _append(self, name, cell):
        if not isinstance(cell, Cell):
            raise TypeError(f"[SequentialCell] item {name!r} is a {type(cell).__name__}, not a Cell")
        setattr(self, name, cell)

    def append(self, cell):
        self._append(str(len(self._cells)), cell)

    def __len__(self):
        return len(self._cells)

    def __getitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            return SequentialCell(cells[index])
        return cells[index]

    def __iter__(self):
        return iter(self._cells.values())

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class CellList(Cell):
    """A list of cells that registers them (indexable, iterable, appendable);
    it has no construct of its own."""

    def __init__(self, cells=None):
        super().__init__()
        for cell in cells or []:
            self.append(cell)

    def append(self, cell):
        if not isinstance(cell, Cell):
            raise TypeError(f"[CellList] {type(cell).__name__} is not a Cell")
        setattr(self, str(len(self._cells)), cell)

    def extend(self, cells):
        for c in cells:
            self.append(c)
        return self

    def __len__(self):
        return len(self._cells)

    def __getitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            return CellList(cells[index])
        return cells[index]

    def __iter__(self):
        return iter(self._cells.values())
