"""spora.Parameter: a Tensor that is model state."""
import functools

from . import _C
from ._tensor import Tensor


class Parameter(Tensor):
    """Model state: a Tensor with a name and requires_grad.

    Inside spora.jit a Parameter read by the traced function becomes a graph
    weight bound to its current value on every call, and assign_value /
    set_data become extra graph outputs written back after the run; that is
    how a whole training step compiles into one graph."""

    def __init__(self, data, name=None, requires_grad=True):
        Tensor.__init__(self, data)
        self._is_param = True
        self.name = name
        self.requires_grad = requires_grad

    @property
    def shape(self):
        """The whole shape, also when semi_auto_parallel keeps only this
        rank's block (spora._spmd; asnumpy() then gives the block)."""
        s = self.__dict__.get("_spmd")
        return s["shape"] if s is not None else Tensor.shape.__get__(self, type(self))

    def init_data(self):
        """Materialises a Parameter declared without data (under
        spora.nn.utils.no_init_parameters, or from Tensor(shape=, dtype=,
        init=)): draws its values from the initializer it was declared with,
        on the default device. Returns self; a no-op when it has data."""
        for d in sorted(self._declarations(), key=lambda d: d[0]):
            self._draw(d)
        if self._meta:
            raise ValueError(f"[Parameter] {self.name!r} was declared without an initializer; give it data "
                             f"with set_data()")
        return self

    def _declarations(self):
        """The draws init_data owes, as (declaration number, initializer,
        shape, dtype, keep): initializers this Parameter was declared with
        and then replaced by set_data while it had no data (drawn and
        dropped, so the generator advances as it did in eager
        construction), then its own initializer while it has no data."""
        out = list(self.__dict__.get("_replaced", ()))
        lazy = self._lazy_init if self._meta else None
        if lazy is not None and lazy[0] is not None:
            out.append((lazy[1], lazy[0], self.shape, self.dtype, True))
        return out

    def _draw(self, declaration):
        from .nn import init
        _, initializer, shape, dtype, keep = declaration
        value = init.draw(initializer, shape, dtype)
        if keep:
            self._set_value(value)
        else:
            self.__dict__["_replaced"].remove(declaration)

    def _replace(self, v):
        """Outside traces: takes v's value (v may itself have no data yet)."""
        lazy = self._lazy_init if self._meta else None
        if lazy is not None and lazy[0] is not None:
            self.__dict__.setdefault("_replaced", []).append((lazy[1], lazy[0], self.shape, self.dtype, False))
        self._set_value(v if v._meta else v._detach())

    def assign_value(self, value):
        """Replaces the contents with `value` (cast to this dtype and
        broadcast to this shape)."""
        v = value if isinstance(value, Tensor) else Tensor(value, self.dtype, self.device)
        if v.dtype != self.dtype:
            v = v.astype(self.dtype)
        if v.shape != self.shape:
            v = v.broadcast_to(self.shape)
        tr = _C.current_trace()
        if tr is not None:
            tr.state.assign(self, v)
        else:
            self._replace(v)
        return self

    def set_data(self, data):
        """Replaces the contents with `data`; shape and dtype may change."""
        v = data if isinstance(data, Tensor) else Tensor(data, None, self.device)
        tr = _C.current_trace()
        if tr is not None:
            if v.shape != self.shape or v.dtype != self.dtype:
                raise ValueError(f"[Parameter] set_data inside jit/grad must keep shape {self.shape} and dtype "
                                 f"{self.dtype.name} (got {v.shape}, {v.dtype.name})")
            tr.state.assign(self, v)
        elif self.__dict__.get("_spmd") is not None and tuple(v.shape) == tuple(self.shape):
            from . import _spmd  # a whole value for a split Parameter: keep this rank's block
            self._set_value(Tensor(_spmd.local_block(self, v.asnumpy()), self.dtype, self.device))
        else:
            self._replace(v)
        return self

    def __repr__(self):
        return f"Parameter(name={self.name!r}, shape={list(self.shape)}, dtype={self.dtype.name}, " \
               f"requires_grad={self.requires_grad})"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        if self._meta:  # declared without data: copies stay so
            return (_restore, (Tensor.__reduce_ex__(self, protocol)[1], None, None, self.name, self.requires_grad))
        return (_restore, (self.asnumpy(), self.dtype.name, self.device, self.name, self.requires_grad))


def _restore(array, dtype, device, name, requires_grad):
    if dtype is None:  # (shape, dtype, initializer) of a Parameter declared without data
        from ._tensor import _declared
        return Parameter(_declared(*array), name, requires_grad)
    return Parameter(Tensor(array, dtype, device), name, requires_grad)


def init_parameters(params, draws=()):
    """init_data for each of params, and the other deferred `draws`
    ((declaration number, callable): a Dropout's seed), all in declaration
    order (Cell.init_parameters_data). Returns the Parameters that got
    data."""
    bare = [p.name for p in params if p._meta and not any(d[4] for d in p._declarations())]
    if bare:
        raise ValueError(f"[Parameter] {bare} were declared without an initializer; give them data with set_data()")
    todo = [(d[0], functools.partial(p._draw, d)) for p in params for d in p._declarations()] + list(draws)
    filled = [p for p in params for d in p._declarations() if d[4]]
    todo.sort(key=lambda e: e[0])
    for _, draw in todo:
        draw()
    return filled


Parameter.__module__ = "spora"
