"""numpy reference implementations of Spora's ops, one module per op family.

Each module registers functions with @ref("op"): fn(inputs, attrs) -> list of
numpy arrays, computed in float64 for float inputs (the harness casts). Every
module in this package is imported automatically.
"""
import importlib
import pkgutil

REFS = {}


def ref(*names):
    def deco(fn):
        for n in names:
            if n in REFS:
                raise ValueError(f"duplicate numpy reference for {n}")
            REFS[n] = fn
        return fn

    return deco


for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
