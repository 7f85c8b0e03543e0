#!/usr/bin/env python3
"""Core's internal layer order (docs/architecture.md): a directory of
core/src may include only its own headers and those of lower layers.

    support <- ir <- ops <- {autodiff, passes} <- runtime <- sched <- {io, data} <- abi

Directories on one level do not include each other. Core never includes
plugin sources (plugins/...): what both share is header-only under sdk/include
(spora/sdk/philox.h). Run by check_layering.sh (ctest abi_layering).
Prints every violation with file:line and exits 1 if there is any."""
import os
import re
import sys

LEVEL = {"support": 0, "ir": 1, "ops": 2, "autodiff": 3, "passes": 3, "runtime": 4, "sched": 5,
         "io": 6, "data": 6, "parallel": 6, "abi": 7}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def main(root):
    src = os.path.join(root, "core", "src")
    bad = []
    for d in sorted(os.listdir(src)):
        path = os.path.join(src, d)
        if not os.path.isdir(path):
            continue
        if d not in LEVEL:
            bad.append(f"core/src/{d}: a directory with no place in the layer order (add it to tests/abi/check_core_layers.py)")
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith((".h", ".cpp")):
                continue
            with open(os.path.join(path, name), encoding="utf-8") as f:
                for no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    where = f"core/src/{d}/{name}:{no}"
                    top = inc.split("/")[0] if "/" in inc else None
                    if top is None:
                        # a bare "x.h": the directory's own header, or one found through an
                        # include path into another tree (plugins/common)
                        if not os.path.exists(os.path.join(path, inc)):
                            bad.append(f"{where}: includes \"{inc}\", which is not in core/src/{d} "
                                       "(core must not reach plugin sources through an include path)")
                        continue
                    if top in ("spora",):  # core/include/spora/*.h, the public API, and sdk/include
                        continue
                    if top not in LEVEL:
                        bad.append(f"{where}: includes \"{inc}\" from outside core/src")
                        continue
                    if top == d:
                        continue
                    if LEVEL[top] >= LEVEL[d]:
                        bad.append(f"{where}: {d} (level {LEVEL[d]}) includes \"{inc}\" from {top} "
                                   f"(level {LEVEL[top]}); only lower layers may be included")
    for b in bad:
        print(b)
    if bad:
        print(f"error: {len(bad)} include(s) break core's layer order "
              "(support <- ir <- ops <- {autodiff, passes} <- runtime <- sched <- {io, data} <- abi)")
        return 1
    print("core layers ok: support <- ir <- ops <- {autodiff, passes} <- runtime <- sched <- {io, data} <- abi")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
