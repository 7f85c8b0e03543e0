"""Inspecting parallel plans (docs/parallel.md).

    spora.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="dynamic_programming")
    ... train a compiled step ...
    spora.parallel.describe_plan(net)   # per-op strategies, estimated step time, memory per device
"""
from . import _spmd


def describe_plan(obj, file=None):
    """Prints (to `file`, default stdout) and returns the partition plan of
    `obj`: a Cell or Model (the latest compiled step that partitioned its
    Parameters), a spora.jit step, or the report dict itself. Under
    auto_parallel with search_mode="dynamic_programming" it lists each op's
    chosen strategy and layouts, the estimated step time (compute and
    communication) and the memory per device; under semi_auto_parallel and
    sharding_propagation, each weight's layout and each op's decision."""
    text = _spmd.describe(_spmd.plan_of(obj))
    print(text, file=file)
    return text


def gather(p):
    """The whole value of Parameter p (numpy); collective when p is split."""
    return _spmd.gather(p)
