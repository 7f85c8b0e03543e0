"""spora.Parameter: a Tensor that is model state."""
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
            self._set_value(v._detach())
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
            self._set_value(v._detach())
        return self

    def __repr__(self):
        return f"Parameter(name={self.name!r}, shape={list(self.shape)}, dtype={self.dtype.name}, " \
               f"requires_grad={self.requires_grad})"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (_restore, (self.asnumpy(), self.dtype.name, self.device, self.name, self.requires_grad))


def _restore(array, dtype, device, name, requires_grad):
    return Parameter(Tensor(array, dtype, device), name, requires_grad)


Parameter.__module__ = "spora"
