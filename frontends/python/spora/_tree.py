"""Flattening nested tuples / lists / dicts of arguments and results into
leaves and back (what jit and grad need to find the tensors)."""

LEAF = None  # the treedef of a single leaf


def flatten(x):
    """(leaves, treedef): treedef is hashable, so it can be a cache key."""
    leaves = []
    return leaves, _flatten(x, leaves)


def _flatten(x, leaves):
    t = type(x)
    if t is tuple or t is list:
        return (t.__name__, tuple(_flatten(e, leaves) for e in x))
    if t is dict:
        keys = tuple(x.keys())
        return ("dict", keys, tuple(_flatten(x[k], leaves) for k in keys))
    leaves.append(x)
    return LEAF


def unflatten(treedef, leaves):
    it = iter(leaves)
    return _build(treedef, it)


def _build(d, it):
    if d is LEAF:
        return next(it)
    if d[0] == "tuple":
        return tuple(_build(e, it) for e in d[1])
    if d[0] == "list":
        return [_build(e, it) for e in d[1]]
    return {k: _build(e, it) for k, e in zip(d[1], d[2])}
