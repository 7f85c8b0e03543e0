"""spora.set_seed / get_seed: one call that makes a run repeat (MindSpore's
mindspore.set_seed).

Spora draws random numbers in three places, each with its own state:
- the host generator of spora.nn.init (initializers, the seeds of Dropout
  layers) -- spora.nn.init.set_seed;
- the counter that gives each spora.ops random call (uniform, normal,
  dropout without a seed) its Philox seed;
- the dataset pipeline's seed (source shuffles, shuffle(), random
  transforms) -- spora.dataset.config.set_seed.
set_seed(s) resets all three from s, and NumPy's global generator too (as
MindSpore does), so a program that calls it first repeats exactly.
"""
import numpy as np

_state = {"seed": None}


def set_seed(seed):
    """Seeds every random source of Spora from `seed` (an int in [0, 2**32)):
    initializers and Dropout layers built afterwards, spora.ops random
    calls made afterwards, dataset pipelines built afterwards, and
    numpy.random."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"[set_seed] seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2 ** 32:
        raise ValueError(f"[set_seed] seed must be in [0, 2**32), got {seed}")
    from . import ops
    from .nn import _util
    from .dataset import config
    _util.set_seed(seed)
    # ops draws seed + 1, seed + 2, ... from this counter: spacing the bases
    # 2**31 apart keeps the streams of two seeds from overlapping.
    ops._seed[0] = seed << 31
    config.set_seed(seed)
    np.random.seed(seed)
    _state["seed"] = seed


def get_seed():
    """The seed given to set_seed, or None when it was never called."""
    return _state["seed"]
