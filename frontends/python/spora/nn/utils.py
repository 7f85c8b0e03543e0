"""spora.nn.utils: declaring a network without allocating its weights.

    with spora.nn.utils.no_init_parameters():
        net = GPT(...)                    # Parameters hold shape and dtype only
    report = spora.parallel.plan(step, x, y, device_num=1024)   # planned from shapes
    net.init_parameters_data()            # or load_checkpoint(...) / set_data later

Inside no_init_parameters, spora.nn.init.initializer (what every spora.nn
layer creates its Parameters with) returns a Tensor without data,
Tensor(shape=, dtype=, init=), so the Parameters made from it are declared
but hold no host or device memory. Parameters made from concrete data (a
NumPy array, a Tensor) are unaffected, as in MindSpore. Reading a declared
Parameter's data (asnumpy(), an eager op, running a compiled step) raises a
RuntimeError naming it; tracing (spora.jit, spora.parallel.plan) needs only
its shape and dtype.

Parameter.init_data() / Cell.init_parameters_data() draw the values then, in
the order the Parameters were declared, from the generator spora.nn.init
seeds: `set_seed(s)`, declaring under no_init_parameters and
init_parameters_data() give the values eager construction after set_seed(s)
gives, when nothing else draws from that generator in between.
"""
import contextlib

from . import init as _init


@contextlib.contextmanager
def no_init_parameters():
    """Context manager (also a decorator): Parameters created inside it from
    an initializer hold no data until init_data() / init_parameters_data()."""
    _init._deferred[0] += 1
    try:
        yield
    finally:
        _init._deferred[0] -= 1
