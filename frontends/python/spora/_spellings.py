"""MindSpore's (and PyTorch's) spellings of the reduction arguments, accepted by keyword beside
Spora's own: keep_dims (mindspore.ops.mean / prod / logsumexp, Tensor.mean / prod / all / any) and
keepdim (ops.sum / argmax / argmin) for keepdims; dim (ops.sum / argmax / argmin) for axis."""
import functools

_ALIASES = (("keep_dims", "keepdims"), ("keepdim", "keepdims"), ("dim", "axis"))


def mindspore_spellings(fn):
    """fn (taking axis= and keepdims=) also taking keep_dims= / keepdim= / dim=."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        for alias, name in _ALIASES:
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"[{fn.__name__}] got both {name}= and {alias}= (two spellings of one argument)")
                kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    return call
