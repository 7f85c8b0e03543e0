"""spora.common: MindSpore's mindspore.common paths, so that

    from spora.common.initializer import Normal, initializer
    import spora.common.dtype as mstype

work as they do in MindSpore. Everything here is defined elsewhere in Spora
(spora.Tensor, spora.nn.init, spora's dtypes); these modules only re-export
it under MindSpore's names."""
from .. import Tensor, Parameter, set_seed, get_seed  # noqa: F401
from . import dtype, initializer  # noqa: F401

__all__ = ["Tensor", "Parameter", "set_seed", "get_seed", "dtype", "initializer"]
