"""Builds one spora._C.OpFn per registry op from its schema
(spora_op_count / spora_op_schema), once, at import.

A schema reads like
  "sum(x: f32|f64) -> (y) attrs: axes: ints = [], keepdims: bool = false"
"""
import inspect
import json
import re
import types

from . import _C

# AttrKind values in the binding (dispatch.cpp).
_KINDS = {"int": 0, "float": 1, "bool": 2, "ints": 3, "floats": 4, "string": 5}
_OPT_INT = 6


def _split_top(s):
    """Splits on ", " outside brackets and quotes."""
    out, depth, cur, quote = [], 0, "", False
    for ch in s:
        if ch == '"':
            quote = not quote
        elif not quote and ch in "[(":
            depth += 1
        elif not quote and ch in "])":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


_SCHEMA = re.compile(r"^(\w+)\((.*?)\) -> \((.*?)\)(?: attrs: (.*))?$")


class Schema:
    __slots__ = ("name", "inputs", "variadic", "outputs", "dynamic_out", "attrs", "text")

    def __init__(self, text):
        m = _SCHEMA.match(text)
        if not m:
            raise ValueError(f"unparsable op schema: {text!r}")
        self.text = text
        self.name = m.group(1)
        ins = _split_top(m.group(2)) if m.group(2) else []
        self.variadic = any(i.split(":")[0].endswith("...") for i in ins)
        self.inputs = [i.split(":")[0].strip().rstrip(".") for i in ins]
        outs = _split_top(m.group(3))
        self.dynamic_out = any(o.endswith("...") for o in outs)
        self.outputs = [o.rstrip(".") for o in outs]
        self.attrs = []  # (name, kind, default text or None)
        for a in _split_top(m.group(4) or ""):
            name, rest = a.split(":", 1)
            if "=" in rest:
                typ, default = (x.strip() for x in rest.split("=", 1))
            else:
                typ, default = rest.strip(), None
            kind = _KINDS[typ]
            if typ == "int" and default == "[]":
                kind = _OPT_INT  # an optional int ("none" by default)
            self.attrs.append((name.strip(), kind, default))


def build():
    """{op name: OpFn} for every registered op."""
    fns = {}
    for name in _C.op_names():
        s = Schema(_C.op_schema(name))
        fn = _C.OpFn(s.name, len(s.inputs), s.variadic, len(s.outputs), s.dynamic_out,
                     [a[0] for a in s.attrs], [a[1] for a in s.attrs], [a[2] is None for a in s.attrs])
        fn.input_names = s.inputs
        fn.__name__ = s.name
        fn.__qualname__ = s.name
        fn.__doc__ = (f"{s.text}\n\nTensor inputs by position ({', '.join(s.inputs) or 'none'}); "
                      "attributes by keyword or position after the inputs; attributes left out take the "
                      "defaults shown. Ops without tensor inputs take device=.")
        fn.schema = s
        fn.__signature__ = _signature(s)
        fns[name] = fn
    return fns


def _default(text):
    """A schema default ("[0, 0]", "false", "\"f32\"", "-inf") as a Python value."""
    t = {"true": "true", "false": "false"}.get(text, text)
    try:
        return json.loads(t)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _signature(s):
    P = inspect.Parameter
    params = []
    if s.variadic:
        params.append(P("inputs", P.POSITIONAL_ONLY))
    else:
        params += [P(i, P.POSITIONAL_ONLY) for i in s.inputs]
    for name, kind, default in s.attrs:
        d = P.empty if default is None else (None if kind == _OPT_INT else _default(default))
        params.append(P(name, P.KEYWORD_ONLY, default=d))  # positions work too
    if not s.inputs:
        params.append(P("device", P.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def namespace(fns):
    ns = types.SimpleNamespace(**fns)
    return ns
