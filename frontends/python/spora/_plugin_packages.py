"""Plugins shipped as Python distributions (`pip install spora-plugin-mpi`).

A distribution makes its plugins known through an entry point in the group
"spora.plugins". The entry point names either

  - a module (``mpi = spora_plugin_mpi``): the module's directory holds the
    plugin files (libspora-device-<name>.so, libspora-collective-<name>.so),
    found without importing the module; or
  - a callable (``mpi = spora_plugin_mpi:plugin_paths``) returning plugin files
    or directories, for a distribution that keeps them elsewhere.

`import spora` reads the entry points and hands the paths to the loader; the
loader opens nothing until the first device query, so importing spora still
initialises no driver. Paths on SPORA_PLUGIN_PATH keep precedence over
packages, and packages over the plugins next to libspora.so.

It also tells the cuda and nccl plugins where NVIDIA's pip wheels
(nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13, ...) put their
libraries: SPORA_NVIDIA_LIBRARY_PATH, when unset, becomes the
nvidia/<part>/lib directories of every site-packages on sys.path. (The
plugins also look beside their own package; this covers wheels installed
elsewhere, e.g. with pip --user.)
"""
import importlib.util
import os
import warnings

GROUP = "spora.plugins"
NVIDIA_LIBRARY_PATH = "SPORA_NVIDIA_LIBRARY_PATH"

_found = None  # [PluginPackage], filled by register()


class PluginPackage:
    """One entry point of the "spora.plugins" group, resolved."""

    def __init__(self, entry, dist, version, paths):
        self.entry = entry      # "mpi = spora_plugin_mpi"
        self.dist = dist        # "spora-plugin-mpi" (None where Python cannot tell)
        self.version = version  # "0.1.0"
        self.paths = paths      # absolute files or directories

    def origin(self):
        if not self.dist:
            return f"from Python entry point '{self.entry}'"
        return f"from Python package {self.dist} {self.version}"

    def __repr__(self):
        return f"PluginPackage({self.dist!r}, {self.version!r}, {self.paths!r})"


def _entry_points():
    from importlib import metadata
    eps = metadata.entry_points()
    if hasattr(eps, "select"):  # Python 3.10+
        return list(eps.select(group=GROUP))
    return list(eps.get(GROUP, []))


def _paths_of(ep):
    if ep.attr:  # a callable: it says where its plugins are
        got = ep.load()()
        if isinstance(got, (str, os.PathLike)):
            got = [got]
        return [os.path.abspath(os.fspath(p)) for p in got]
    spec = importlib.util.find_spec(ep.module)
    if spec is None:
        raise ImportError(f"module {ep.module!r} is not installed")
    if spec.submodule_search_locations:
        return [os.path.abspath(p) for p in spec.submodule_search_locations]
    return [os.path.dirname(os.path.abspath(spec.origin))]


def discover():
    """The installed plugin packages, each with the paths of its plugins. An
    entry point that cannot be resolved is skipped with a warning that names
    its distribution."""
    out = []
    for ep in _entry_points():
        dist = getattr(ep, "dist", None)
        name = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
        text = f"{ep.name} = {ep.value}"
        try:
            paths = _paths_of(ep)
        except Exception as e:  # a broken third-party package must not break `import spora`
            warnings.warn(f"spora: plugin entry point '{text}' of {name or 'an unknown distribution'} "
                          f"cannot be resolved ({type(e).__name__}: {e}); its plugins are not loaded. "
                          f"Reinstall it (pip install --force-reinstall {name or '<package>'})",
                          RuntimeWarning, stacklevel=2)
            continue
        out.append(PluginPackage(text, name, version, paths))
    return out


def nvidia_library_dirs():
    """The lib directories of NVIDIA's pip wheels importable here, in
    sys.path order: <site-packages>/nvidia/<part>/lib (CUDA 13's cu13,
    cudnn, nccl; CUDA 12's cublas, cuda_nvrtc, ...). Found without importing
    anything: `nvidia` is a namespace package."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for loc in spec.submodule_search_locations:
        try:
            parts = sorted(os.listdir(loc))
        except OSError:
            continue
        for part in parts:
            lib = os.path.join(loc, part, "lib")
            if os.path.isdir(lib) and lib not in out:
                out.append(lib)
    return out


def register(add_plugin_path):
    """Hands the plugin packages' paths to the loader (add_plugin_path is
    spora._C.add_plugin_path) and NVIDIA's wheel directories to the plugins
    (SPORA_NVIDIA_LIBRARY_PATH, unless set). Returns the packages."""
    global _found
    if NVIDIA_LIBRARY_PATH not in os.environ:
        dirs = nvidia_library_dirs()
        if dirs:  # read by the plugins when they initialize, after this
            os.environ[NVIDIA_LIBRARY_PATH] = os.pathsep.join(dirs)
    _found = discover()
    if not _found:
        return _found
    # Explicit paths are searched before SPORA_PLUGIN_PATH; name its entries
    # first so that a plugin a user points at still wins over a package's
    # (the loader counts a file reached twice once).
    for item in os.environ.get("SPORA_PLUGIN_PATH", "").split(":"):
        if item and os.path.exists(item):
            add_plugin_path(item)
    for pkg in _found:
        for p in pkg.paths:
            add_plugin_path(p)
    return _found


def packages():
    """The plugin packages found at import (discovering them now if spora's
    import did not)."""
    return _found if _found is not None else discover()


def package_of(path):
    """The PluginPackage a loaded plugin file came from, or None."""
    if not path:
        return None
    real = os.path.realpath(path)
    for pkg in packages():
        for p in pkg.paths:
            rp = os.path.realpath(p)
            if real == rp or real.startswith(rp.rstrip(os.sep) + os.sep):
                return pkg
    return None


def explain(plugin):
    """The loader's reason for a plugin (a dict of spora._C.plugins()), with
    the fix for a plugin from a Python package built for another plugin ABI."""
    reason = plugin.get("reason", "")
    pkg = package_of(plugin.get("path", ""))
    if pkg is None or "plugin ABI" not in reason:
        return reason
    from . import _C
    hint = f"pip install -U {pkg.dist}" if pkg.dist else "reinstall the package that provides it"
    return (f"{reason}. It comes {pkg.origin()}, which does not match spora {'%d.%d.%d' % _C.version()}: "
            f"{hint} (or install the spora version that package was built for)")


def refusal(name, kind):
    """explain() for the plugin `name` of `kind` ("device", "collective") when
    a Python package provides it and the loader refused it for its plugin ABI;
    "" otherwise."""
    from . import _C
    for p in _C.plugins():
        if p["name"] == name and p["kind"] in (kind, "unknown") and not p["available"]:
            why = explain(p)
            if why != p.get("reason", ""):
                return f"{name}: {why}"
    return ""
