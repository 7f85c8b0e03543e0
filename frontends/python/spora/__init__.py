"""Spora: a deep-learning framework in the line of MindSpore.

    import spora
    x = spora.Tensor([[1.0, 2.0]])
    spora.set_device("cpu")
    spora.set_context(mode=spora.GRAPH_MODE)
"""
import os as _os

from . import _C

# Frames inside this package are not "the user's line" in error messages.
_C._set_internal_dirs([_os.path.dirname(_os.path.abspath(__file__)) + _os.sep])

# Plugins installed as Python packages (entry points "spora.plugins"): their
# paths go to the loader, which opens nothing before the first device query.
from . import _plugin_packages  # noqa: E402
_plugin_packages.register(_C.add_plugin_path)

from ._C import (SporaError, SporaValueError, SporaTypeError, BackendUnavailableError,  # noqa: E402
                 UntraceableError, from_dlpack)
from ._dtype import (DType, float32, float64, float16, bfloat16, int32, int64, uint8, bool_)  # noqa: E402
from ._tensor import Tensor  # noqa: E402
from . import _tensor_extra  # noqa: E402,F401  (more Tensor methods)
from ._parameter import Parameter  # noqa: E402
from ._context import (PYNATIVE_MODE, GRAPH_MODE, devices, set_device, get_device, set_context,  # noqa: E402
                       get_context, STRICT, COMPATIBLE, LAX)
from . import ops  # noqa: E402
from ._autograd import grad, value_and_grad  # noqa: E402
from ._functional_ad import vjp, jvp  # noqa: E402
from ._jit import jit, JitFunction, JitFallbackWarning  # noqa: E402
from . import _jit  # noqa: E402
from ._parallel import (set_auto_parallel_context, get_auto_parallel_context,  # noqa: E402
                        reset_auto_parallel_context, ParallelMode)
from ._seed import set_seed, get_seed  # noqa: E402
from ._sparse import CSRTensor, COOTensor  # noqa: E402
from ._grad_operation import ParameterTuple  # noqa: E402

for _e in (SporaError, SporaValueError, SporaTypeError, BackendUnavailableError, UntraceableError):
    _e.__module__ = "spora"

zeros = ops.zeros
ones = ops.ones
full = ops.full
arange = ops.arange
eye = ops.eye
zeros_like = ops.zeros_like
ones_like = ops.ones_like
concat = ops.concat
stack = ops.stack
where = ops.where
stop_gradient = ops.stop_gradient


def tensor(data, dtype=None, device=None):
    """Same as spora.Tensor(data, dtype, device)."""
    return Tensor(data, dtype, device)


__version__ = "%d.%d.%d" % _C.version()

# Checkpoints and exported models (spora.serialization); spora.nn,
# spora.train, spora.dataset, spora.amp, spora.runtime, spora.parallel and spora.common load on first use.
from .serialization import (save_checkpoint, load_checkpoint, load_checkpoint_metadata,  # noqa: E402
                            load_param_into_net, export, load)
from .profiler import Profiler  # noqa: E402


def __getattr__(name):
    if name in ("nn", "train", "dataset", "communication", "amp", "runtime", "parallel", "common", "numpy"):
        import importlib
        return importlib.import_module("." + name, __name__)
    # MindSpore exports spora.train's names at the top too (mindspore.Model,
    # mindspore.LossMonitor, ...).
    import importlib
    train = importlib.import_module(".train", __name__)
    if name in train.__all__:
        return getattr(train, name)
    raise AttributeError(f"module 'spora' has no attribute {name!r}")
