"""The `spora` command of a pip-installed Spora (and `python -m spora`).

`spora devices` lists the plugins the loader found -- from SPORA_PLUGIN_PATH,
from Python packages (entry points "spora.plugins") or next to libspora.so --
with where each came from, why any is unusable, and the devices. The other
subcommands (run, launch, plugin, ...) belong to the C++ tool that the Debian
package spora-tools and a source build install: when it is on PATH, this
command hands them to it with this environment's plugin packages added to
SPORA_PLUGIN_PATH, so `spora plugin check <name>` in a venv certifies the
plugin a wheel installed there."""
import os
import sys

_USAGE = ("usage: spora devices [--plugin-path PATH]...\n"
          "  lists the plugins (with their origin) and the devices this Python environment sees.\n"
          "The pip package provides this subcommand only; run, launch, plugin check and the others come with\n"
          "the C++ tool (Debian package spora-tools, or a source build: see docs/install.md); with it on PATH,\n"
          "`spora <subcommand>` runs it and it sees the plugin packages installed here.\n")


def _origin(path):
    from . import _plugin_packages
    pkg = _plugin_packages.package_of(path)
    if pkg is not None:
        return pkg.origin()
    real = os.path.realpath(path)
    for item in os.environ.get("SPORA_PLUGIN_PATH", "").split(":"):
        if item and (real == os.path.realpath(item) or real.startswith(os.path.realpath(item) + os.sep)):
            return "from SPORA_PLUGIN_PATH"
    lib = _libspora_dir()
    if lib and real.startswith(os.path.join(lib, "spora", "plugins") + os.sep):
        return "installed with spora (next to libspora.so)"
    return "added by path"


def _libspora_dir():
    """The directory of the libspora.so this process loaded (the loader's
    default plugin directory is <it>/spora/plugins)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libspora.so"):
                    return os.path.dirname(os.path.realpath(path))
    except OSError:
        pass
    return ""


def devices(argv, out=sys.stdout):
    from . import _C, _plugin_packages
    i = 0
    while i < len(argv):
        if argv[i] == "--plugin-path" and i + 1 < len(argv):
            _C.add_plugin_path(argv[i + 1])
            i += 2
        else:
            sys.stderr.write(f"spora devices: unknown option '{argv[i]}'\n{_USAGE}")
            return 2
    # Listing devices initialises the device plugins; first, so that their
    # failures show in the plugin list.
    devs = _C.device_names()
    plugins = _C.plugins()
    if not plugins:
        out.write("no plugins found; set SPORA_PLUGIN_PATH, pip install a plugin package "
                  "(spora-plugin-mpi, ...), or reinstall spora\n")
        return 1
    out.write("plugins:\n")
    for p in plugins:
        state = "ok" if p["available"] else "UNAVAILABLE"
        out.write(f"  {p['name']:<10} {p['kind']:<10} {state:<8} {p['path']}\n")
        out.write(f"             origin: {_origin(p['path'])}\n")
        if not p["available"]:
            out.write(f"             reason: {_plugin_packages.explain(p)}\n")
    out.write("devices:\n")
    for d in devs:
        out.write(f"  {d}\n")
    if not devs:
        out.write("  (none usable)\n")
    return 0


def _cpp_tool():
    """Another `spora` on PATH than this script: the C++ tool."""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cand = os.path.join(d, "spora")
        if os.path.isfile(cand) and os.access(cand, os.X_OK) and os.path.realpath(cand) != me:
            with open(cand, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    return cand
    return ""


def _with_plugin_packages(environ):
    """environ with the plugin packages' paths appended to SPORA_PLUGIN_PATH
    (after the user's own entries, which keep precedence as in the loader)."""
    import spora  # noqa: F401  (finds the plugin packages)
    from . import _plugin_packages
    items = [p for p in environ.get("SPORA_PLUGIN_PATH", "").split(":") if p]
    for pkg in _plugin_packages.packages():
        items += [p for p in pkg.paths if p not in items and os.path.exists(p)]
    env = dict(environ)
    if items:
        env["SPORA_PLUGIN_PATH"] = ":".join(items)
    return env


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "devices":
        import spora  # noqa: F401  (registers the plugin packages)
        return devices(argv[1:])
    tool = _cpp_tool()
    if tool:  # the C++ tool is installed too (spora-tools, a source build): it does the rest
        os.execve(tool, [tool] + argv, _with_plugin_packages(os.environ))
    if argv and argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(_USAGE)
        return 0
    sys.stderr.write((f"spora: '{argv[0]}' is not available from the pip package\n" if argv else "") + _USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main())
