"""Reference of fused_elementwise: the program (core/src/ops/fused.h) run
instruction by instruction with the numpy references of its component ops,
in float64."""
import numpy as np

from . import REFS, ref


def _attr(text):
    try:
        return float(text)
    except ValueError:
        return text


def run_program(program, inputs):
    """Evaluates `program` (the fused_elementwise grammar) on numpy arrays."""
    temps = []
    for instr in filter(None, (s.strip() for s in program.split(";"))):
        toks = instr.split()
        args, k = [], 0
        while k < len(toks):
            t = toks[k]
            if t.startswith("c:"):
                args.append(np.array(float(t[2:])))
            elif t.startswith("in") and t[2:].isdigit():
                args.append(inputs[int(t[2:])])
            elif t.startswith("t") and t[1:].isdigit():
                args.append(temps[int(t[1:])])
            else:
                break
            k += 1
        op = toks[k]
        attrs = {name: _attr(v) for name, v in (a.split("=", 1) for a in toks[k + 1:])}
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            temps.append(np.asarray(REFS[op](args, attrs)[0]))
    return temps[-1]


@ref("fused_elementwise")
def _fused(x, a):
    out = run_program(a["program"], x)
    shape = np.broadcast_shapes(*(np.shape(v) for v in x))
    return [np.broadcast_to(out, shape).astype(np.float64)]
