"""python3-spora as installed from its .deb: run by deb_test.sh with the
system interpreter in isolated mode (-I [-S] -B, so neither the build tree, the
venv nor PYTHONPATH is on sys.path) after the extracted
<root>/usr/lib/python3/dist-packages is put first on sys.path.

usage: python3 -I -S deb_python_check.py <root> <dist-packages> [<numpy dir>]

Checks that the package, its _C module, libspora.so.0 and the cpu plugin
all come from <root>; that the devices include cpu and sim; and that a
matmul/tanh/sum and its gradient on cpu (eager and @spora.jit) match numpy.
"""
import os
import sys

root, pydir = (os.path.realpath(p) for p in sys.argv[1:3])
sys.path[:0] = [pydir] + sys.argv[3:]

import numpy as np  # noqa: E402
import spora  # noqa: E402


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def under(path, top):
    return os.path.realpath(path).startswith(top + os.sep)


if os.path.realpath(spora.__file__) != os.path.join(pydir, "spora", "__init__.py"):
    fail(f"imported spora from {spora.__file__}, not from {pydir}")
if not under(spora._C.__file__, os.path.join(pydir, "spora")):
    fail(f"spora._C is {spora._C.__file__}, not in the extracted package")

# What the dynamic loader actually mapped: libspora and the cpu plugin from
# the root (through _C's RUNPATH and libspora's plugin directory), never the
# build tree.
maps = open("/proc/self/maps").read().split("\n")
mapped = {line.split()[-1] for line in maps if line.count("/") and ".so" in line}
libspora = [p for p in mapped if os.path.basename(p).startswith("libspora.so")]
if not libspora or not all(under(p, root) for p in libspora):
    fail(f"libspora mapped from {libspora or 'nowhere'}, not from {root}")

devs = spora.devices()
print("spora", spora.__version__, "from", os.path.dirname(spora.__file__))
print("devices:", [str(d) for d in devs])
for want in ("cpu", "sim:0"):
    if want not in devs:
        fail(f"device {want} missing from spora.devices() = {devs!r} (all: {spora.devices(all=True)!r})")
plugins = {p["name"]: p for p in spora._C.plugins()}
if "cpu" not in plugins or not under(plugins["cpu"]["path"], root):
    fail(f"cpu plugin not loaded from the root: {plugins.get('cpu')!r}")

rng = np.random.default_rng(6)
a = rng.standard_normal((5, 4))
b = rng.standard_normal((4, 3))
# f(a) = sum(tanh(a @ b)); df/da = (1 - tanh(a @ b)^2) @ b^T
y = np.tanh(a @ b)
want_val, want_grad = y.sum(), (1.0 - y * y) @ b.T

spora.set_device("cpu")
ta, tb = spora.Tensor(a), spora.Tensor(b)


def f(x, w):
    return spora.ops.sum(spora.ops.tanh(spora.ops.matmul(x, w)))


for name, fn in (("eager", spora.value_and_grad(f)), ("jit", spora.jit(spora.value_and_grad(f)))):
    val, g = fn(ta, tb)
    val, g = val.asnumpy(), g.asnumpy()
    if g.dtype != np.float64 or g.shape != a.shape:
        fail(f"{name}: gradient is {g.dtype}{g.shape}, expected float64{a.shape}")
    err_v, err_g = abs(float(val) - want_val), float(np.max(np.abs(g - want_grad)))
    print(f"{name}: |value - numpy| = {err_v:.2e}, max |grad - numpy| = {err_g:.2e}")
    if err_v > 1e-10 or err_g > 1e-10:
        fail(f"{name}: value/gradient differ from numpy (value {float(val)} vs {want_val})")
print("python3-spora: ok")
