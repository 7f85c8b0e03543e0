"""Backends by name and the execution mode (PyNative or graph)."""
from . import _C, _plugin_packages
from ._C import BackendUnavailableError

PYNATIVE_MODE = 1
GRAPH_MODE = 0

# MindSpore's jit_syntax_level values. Spora's graph mode traces construct as
# Python runs it, so every level accepts the same programs (see set_context).
STRICT = 0
COMPATIBLE = 1
LAX = 2
_SYNTAX_LEVELS = {STRICT: "STRICT", COMPATIBLE: "COMPATIBLE", LAX: "LAX"}

_ctx = {"mode": PYNATIVE_MODE, "jit_level": 1, "jit_syntax_level": LAX}
_KEYS = ("mode", "device_target", "device_id", "jit_level", "matmul_precision", "conv_precision", "jit_syntax_level")
_MATMUL_PRECISIONS = ("highest", "high", "medium")
_CONV_PRECISIONS = ("highest", "high")


class DeviceInfo(str):
    """A device name ("cpu", "sim:0") or, for a backend whose plugin could
    not be used, the plugin's name; with .available and .reason."""

    def __new__(cls, name, available=True, reason="", kind="device", plugin=""):
        s = super().__new__(cls, name)
        s.available = available
        s.reason = reason
        s.kind = kind
        s.plugin = plugin
        return s

    def __repr__(self):
        if self.available:
            return f"DeviceInfo({str(self)!r})"
        return f"DeviceInfo({str(self)!r}, available=False, reason={self.reason!r})"


def devices(all=False):
    """Usable devices by name, e.g. ['cpu', 'sim:0']. With all=True, device
    plugins that failed to load are listed too (available=False, with the
    loader's reason)."""
    out = [DeviceInfo(n) for n in _C.device_names()]
    if all:
        for p in _C.plugins():
            if p["kind"] in ("device", "unknown") and not p["available"]:
                out.append(DeviceInfo(p["name"], False, _plugin_packages.explain(p), p["kind"], p["path"]))
    return out


# MindSpore's device_target spellings that are not Spora backend names.
_GPU_BACKENDS = ("cuda", "rocm")


def _available_names():
    return [str(d) for d in devices()]


def _plugin_reasons(backends):
    """'cuda: <reason>; rocm: <reason>' for device plugins that could not be
    used, or that were not found at all (every file of that name: a broken
    file on SPORA_PLUGIN_PATH and the installed one each say why)."""
    plugins = [p for p in _C.plugins() if p["kind"] in ("device", "unknown")]
    have = _available_names()
    parts = []
    for b in backends:
        mine = [p for p in plugins if p["name"] == b]
        if not mine:
            parts.append(f"{b}: no plugin found (libspora-device-{b}.so is not installed or not on SPORA_PLUGIN_PATH)")
        for p in mine:
            if not p["available"]:
                parts.append(f"{b}: {_plugin_packages.explain(p) or 'unavailable'}")
            elif not any(n == b or n.startswith(b + ":") for n in have):
                parts.append(f"{b}: the plugin loaded but reports no device")
    return "; ".join(parts)


def _resolve(target, device_id=None, who="set_context"):
    """The device name ("cpu", "sim:0", "cuda:1") for a device_target and an
    optional device_id. device_target is a backend ("sim"), a device
    ("sim:0"), case-insensitive, or one of MindSpore's spellings ("CPU",
    "GPU"; "Ascend" is refused). A device_id that contradicts the index in
    device_target is a ValueError."""
    raw = str(target).strip()
    base, colon, idx = raw.lower().partition(":")
    index = None
    if colon:
        if not idx.isdigit():
            raise ValueError(f"{who}: {raw!r} is not a device name; write a backend (\"sim\") or "
                             f"<backend>:<index> (\"sim:0\")")
        index = int(idx)
    if device_id is not None:
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"{who}: device_id must be an integer >= 0, got {device_id!r}")
        if index is not None and index != device_id:
            raise ValueError(f"{who}: device_target={raw!r} names device {index} but device_id={device_id}; "
                             f"write device_target=\"{base}:{device_id}\" (or device_target=\"{base}\", "
                             f"device_id={device_id})")
        index = device_id
    if base in ("ascend", "npu", "davinci"):
        raise BackendUnavailableError(
            f"{who}: Spora has no Ascend backend (device_target={raw!r}); available devices: "
            f"{', '.join(_available_names())}. Write device_target=\"cpu\", or \"gpu\" / \"cuda\" for an "
            f"NVIDIA GPU, or another device from spora.devices()")
    if base == "gpu":
        have = _available_names()
        for b in _GPU_BACKENDS:
            if any(n == b or n.startswith(b + ":") for n in have):
                base = b
                break
        else:
            raise BackendUnavailableError(
                f"{who}: device_target={raw!r} means CUDA or ROCm, and neither is available ("
                f"{_plugin_reasons(_GPU_BACKENDS)}); available devices: {', '.join(have)}. "
                f"Check `spora devices` for details")
    if not base:
        raise ValueError(f"{who}: {raw!r} is not a device name")
    return f"{base}:{index}" if index is not None else base


def set_device(name):
    """Makes `name` the default device for new tensors and compiled graphs.

    name is a device ("cpu", "sim:0", "cuda:1") or a backend ("sim", meaning
    its device 0), case-insensitive; "GPU" means the first of CUDA and ROCm
    that is available, "CPU" the cpu. An unknown or broken backend raises
    spora.BackendUnavailableError with the loader's reason and how to fix it."""
    target = _resolve(name, who="set_device")
    try:
        _C.set_device(target)
    except BackendUnavailableError as e:
        hint = _plugin_packages.refusal(target.partition(":")[0], "device")
        if hint and hint not in str(e):
            raise BackendUnavailableError(f"{e}; {hint}") from e
        raise


def get_device():
    """The default device's name, e.g. "cpu" or "sim:0"."""
    return _C.get_device()


def _split(name):
    base, _, idx = str(name).partition(":")
    return base, int(idx) if idx else 0


# MindSpore set_context options with no Spora switch. Those whose value can
# change nothing here are accepted (checked, then ignored); the others raise
# saying what Spora offers instead.
_NO_EFFECT = {
    "max_call_depth": "Spora traces construct by running Python, so the depth limit is Python's "
                      "(sys.setrecursionlimit)",
    "pynative_synchronize": "to wait for the device, call spora.runtime.synchronize()",
}
_INSTEAD = {
    "save_graphs": "Spora does not dump graphs from set_context: a spora.jit function's latest graph is "
                   "fn.last_graph (print it, or .json())",
    "save_graphs_path": "Spora does not dump graphs from set_context: a spora.jit function's latest graph is "
                        "fn.last_graph (print it, or .json())",
    "max_device_memory": "Spora has no device memory cap; spora.runtime.memory_stats() reports what is used",
    "runtime_num_threads": "set SPORA_NUM_THREADS in the environment before importing spora",
    "enable_graph_kernel": "operator fusion follows set_context(jit_level=0, 1 or 2)",
    "jit_config": "write set_context(jit_level=0, 1 or 2)",
}


def _mindspore_options(options):
    """Accepts the no-effect options (and save_graphs=False), raises for the others."""
    problems = []
    for k, v in sorted(options.items()):
        if k == "max_call_depth" and not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
            raise ValueError(f"set_context: max_call_depth must be a positive int, got {v!r}")
        if k == "pynative_synchronize" and not isinstance(v, bool):
            raise ValueError(f"set_context: pynative_synchronize must be a bool, got {v!r}")
        if k in _NO_EFFECT or (k == "save_graphs" and v in (False, 0)):
            continue
        if k in _INSTEAD:
            problems.append(f"{k}: {_INSTEAD[k]}")
        else:
            problems.append(k)
    if problems:
        raise TypeError("set_context: unknown option(s) -- " + "; ".join(problems) +
                        " (known: mode, device_target, device_id, jit_level, matmul_precision, conv_precision,"
                        " jit_syntax_level)")


def set_context(mode=None, device_target=None, device_id=None, jit_level=None, matmul_precision=None,
                jit_syntax_level=None, conv_precision=None, **unknown):
    """MindSpore-style switch.

    mode: spora.PYNATIVE_MODE (eager) or spora.GRAPH_MODE (Cells and grad
    functions compile through spora.jit).

    device_target: where tensors and compiled graphs go -- a backend name
    ("cpu", "sim", "cuda", "rocm", "ze") or a device ("sim:0", "cuda:1"),
    case-insensitive. MindSpore's spellings work too: "CPU" is the cpu;
    "GPU" means CUDA, or ROCm when that is what is available (the first of
    cuda, rocm that has a device; neither: spora.BackendUnavailableError
    naming each plugin's reason); "Ascend" is refused (Spora has no Ascend
    backend). device_id: the device index (default 0); it may be given
    alone to pick another device of the current backend, and must agree with
    an index written in device_target ("sim:0" with device_id=1 is a
    ValueError). spora.devices() lists the devices by name.

    jit_level: the optimisation level of compiled graphs (0, 1 or 2).

    matmul_precision: how f32 matmul, linear and its fused forms may be
    computed, as torch.set_float32_matmul_precision: "highest" (the default:
    full FP32 products), "high" (a GPU may use TF32 tensor cores), "medium"
    (bf16 or TF32). Process-wide; it applies to kernels planned afterwards
    (a compiled graph keeps the kernels it was compiled with). The half
    types and f64 are unaffected, as is the cpu.

    conv_precision: how f32 convolutions (conv2d and its fused forms,
    their gradients, conv2d_transpose) may be computed, as PyTorch's
    torch.backends.cudnn.allow_tf32: "highest" (the default: full FP32),
    "high" (a GPU may use TF32 tensor cores; PyTorch's default). Process-wide
    and applied to kernels planned afterwards, as matmul_precision; the half
    types, f64 and the cpu are unaffected.

    jit_syntax_level: spora.STRICT, spora.COMPATIBLE or spora.LAX (also
    their names as strings), accepted for MindSpore programs and returned
    by get_context; it changes nothing. MindSpore parses construct's source
    and the level says how much Python its compiler accepts; Spora traces
    construct by running it, so any Python runs at every level (what cannot
    be traced -- a branch on a tensor's value -- runs eagerly with a
    spora.JitFallbackWarning), and spora.export takes any traceable network
    (MindSpore exports MINDIR under STRICT only).

    MindSpore's max_call_depth, pynative_synchronize and save_graphs=False
    are accepted and change nothing (Spora has no call-depth limit of its
    own; a result does not depend on synchronisation; nothing is saved).
    Its other options raise a TypeError saying what Spora offers instead."""
    if unknown:
        _mindspore_options(unknown)
    if mode is not None:
        if mode not in (PYNATIVE_MODE, GRAPH_MODE):
            raise ValueError(f"set_context: mode must be spora.PYNATIVE_MODE or spora.GRAPH_MODE, got {mode!r}")
    if jit_level is not None:
        if jit_level not in (0, 1, 2):
            raise ValueError("set_context: jit_level must be 0, 1 or 2")
    if jit_syntax_level is not None:
        jit_syntax_level = _syntax_level(jit_syntax_level)
    if matmul_precision is not None and matmul_precision not in _MATMUL_PRECISIONS:
        raise ValueError(f"set_context: matmul_precision must be \"highest\", \"high\" or \"medium\", "
                         f"got {matmul_precision!r}")
    if conv_precision is not None and conv_precision not in _CONV_PRECISIONS:
        raise ValueError(f"set_context: conv_precision must be \"highest\" or \"high\", got {conv_precision!r}")
    if device_target is not None:
        _C.set_device(_resolve(device_target, device_id))
    elif device_id is not None:
        base, _ = _split(_C.get_device())
        _C.set_device(_resolve(base, device_id))
    if mode is not None:
        _ctx["mode"] = mode
    if jit_level is not None:
        _ctx["jit_level"] = jit_level
    if jit_syntax_level is not None:
        _ctx["jit_syntax_level"] = jit_syntax_level
    if matmul_precision is not None:
        _C.set_option("matmul_precision", matmul_precision)
    if conv_precision is not None:
        _C.set_option("conv_precision", conv_precision)


def _syntax_level(v):
    if isinstance(v, str) and v.upper() in _SYNTAX_LEVELS.values():
        return {name: level for level, name in _SYNTAX_LEVELS.items()}[v.upper()]
    if isinstance(v, bool) or v not in _SYNTAX_LEVELS:
        raise ValueError(f"set_context: jit_syntax_level must be spora.STRICT, spora.COMPATIBLE or spora.LAX, "
                         f"got {v!r}")
    return int(v)


def get_context(key):
    """The value of a set_context option: "mode", "jit_level", "jit_syntax_level", "device_target"
    (the default device's backend, e.g. "cpu", "sim", "cuda" -- also after
    device_target="GPU"), "device_id" (its index), "matmul_precision" or "conv_precision"."""
    if key not in _KEYS:
        raise ValueError(f"get_context: unknown key {key!r} (known: {', '.join(_KEYS)})")
    if key == "device_target":
        return _split(_C.get_device())[0]
    if key == "device_id":
        return _split(_C.get_device())[1]
    if key in ("matmul_precision", "conv_precision"):
        return _C.get_option(key)
    return _ctx[key]
