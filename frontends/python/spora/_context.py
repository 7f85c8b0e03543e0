"""Backends by name and the execution mode (PyNative or graph)."""
from . import _C

PYNATIVE_MODE = 1
GRAPH_MODE = 0

_ctx = {"mode": PYNATIVE_MODE, "device_target": "cpu", "device_id": 0, "jit_level": 1}


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
                out.append(DeviceInfo(p["name"], False, p["reason"], p["kind"], p["path"]))
    return out


def set_device(name):
    """Makes `name` ("cpu", "sim:0") the default device for new tensors and
    compiled graphs. An unknown or broken backend raises
    spora.BackendUnavailableError with the loader's reason and how to fix it."""
    _C.set_device(str(name))
    base, _, idx = str(name).partition(":")
    _ctx["device_target"] = base
    _ctx["device_id"] = int(idx) if idx else 0


def get_device():
    return _C.get_device()


def set_context(mode=None, device_target=None, device_id=None, jit_level=None, **unknown):
    """MindSpore-style switch: mode=spora.PYNATIVE_MODE (eager) or
    spora.GRAPH_MODE (Cells and grad functions compile through spora.jit);
    device_target="cpu" / "sim" (case-insensitive) with device_id; jit_level
    the optimisation level of compiled graphs (0, 1 or 2)."""
    if unknown:
        raise TypeError(f"set_context: unknown option(s) {', '.join(sorted(unknown))} "
                        f"(known: mode, device_target, device_id, jit_level)")
    if mode is not None:
        if mode not in (PYNATIVE_MODE, GRAPH_MODE):
            raise ValueError(f"set_context: mode must be spora.PYNATIVE_MODE or spora.GRAPH_MODE, got {mode!r}")
        _ctx["mode"] = mode
    if device_target is not None or device_id is not None:
        target = (device_target or _ctx["device_target"]).lower()
        did = _ctx["device_id"] if device_id is None else int(device_id)
        set_device(f"{target}:{did}")
    if jit_level is not None:
        if jit_level not in (0, 1, 2):
            raise ValueError("set_context: jit_level must be 0, 1 or 2")
        _ctx["jit_level"] = jit_level


def get_context(key):
    if key not in _ctx:
        raise ValueError(f"get_context: unknown key {key!r} (known: {', '.join(_ctx)})")
    return _ctx[key]
