"""The SDK's plugin template built as a wheel, installed into a fresh venv
beside spora, and certified by `spora plugin check` from that venv (issue 23
line 3).

  pip_template_test.py <build dir> <libdir> <cmake> [--spora-wheel <source dir>]

1. `cmake --install <build dir>` into a temporary prefix: the SDK a vendor
   has (Spora's CMake package, headers, the template, the C++ tool).
2. The template, copied out of the prefix and filled in (PLUGIN_NAME tmpl in
   CMakeLists.txt, CHANGE_ME in pyproject.toml), is built with
   `CMAKE_PREFIX_PATH=<prefix> pip wheel` (scikit-build-core from this
   interpreter, no build isolation: nothing is downloaded). The wheel must
   hold spora_plugin_tmpl/{__init__.py,libspora-device-tmpl.so} and nothing
   else; a pyproject.toml left unfilled must stop the build, saying so.
3. A fresh venv gets the plugin wheel and spora:
   - by default, spora is the build tree's package in its documented
     development mode (`PYTHONPATH=<build>/python`, here as a .pth file in
     the venv) and numpy this interpreter's (linked into a directory of its
     own, also by a .pth file): seconds, no network; the plugin wheel is
     installed with --no-deps, spora being no pip distribution there;
   - with --spora-wheel, spora is the wheel `pip wheel <source dir>` builds
     (the pip user's way; ~8 min on 2 cores the first time, then its
     scikit-build directory build/pip-<tag> is reused) and pip resolves the
     plugin's dependency on it; numpy comes from PyPI or pip's cache.
4. From the venv: `spora devices` lists tmpl as ok with origin
   "from Python package spora-plugin-tmpl 0.1.0"; `spora plugin check tmpl`
   (the SDK's C++ tool on PATH, to which the venv's spora command hands the
   plugin packages) certifies the file the wheel installed.
Exit 77 (skipped) when this interpreter lacks scikit-build-core or, with
--spora-wheel, pip cannot get numpy."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile

SKIP = 77


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(r, what):
    if r.returncode != 0:
        sys.exit(f"FAILED: {what} (exit {r.returncode})\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def fill_in(template, name, pyproject_too=True):
    cm = os.path.join(template, "CMakeLists.txt")
    with open(cm) as f:
        text = f.read()
    assert 'set(PLUGIN_NAME "CHANGE_ME")' in text, "the template's PLUGIN_NAME line changed"
    with open(cm, "w") as f:
        f.write(text.replace('set(PLUGIN_NAME "CHANGE_ME")', f'set(PLUGIN_NAME "{name}")'))
    if pyproject_too:
        pp = os.path.join(template, "pyproject.toml")
        with open(pp) as f:
            text = f.read()
        assert text.count("CHANGE_ME") == 3, "pyproject.toml should name the plugin in three places"
        with open(pp, "w") as f:
            f.write(text.replace("CHANGE_ME", name))


def main():
    args = sys.argv[1:]
    spora_src = None
    if "--spora-wheel" in args:
        i = args.index("--spora-wheel")
        spora_src = args[i + 1]
        del args[i:i + 2]
    build, libdir, cmake = args[:3]
    if run([sys.executable, "-c", "import scikit_build_core"]).returncode != 0:
        print(f"SKIPPED: {sys.executable} lacks scikit-build-core (packaging/install-deps.sh installs it)")
        return SKIP
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="spora-sdk-wheel.")
    try:
        return test(build, libdir, cmake, spora_src, tmp, t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test(build, libdir, cmake, spora_src, tmp, t0):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "SPORA_PLUGIN_PATH", "SPORA_LIB", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
                          "CMAKE_PREFIX_PATH", "Spora_DIR", "SPORA_NVIDIA_LIBRARY_PATH")}
    prefix = os.path.join(tmp, "prefix")
    must(run([cmake, "--install", build, "--prefix", prefix]), "cmake --install (the SDK)")
    template = os.path.join(prefix, "share", "spora", "template")
    assert os.path.isfile(os.path.join(template, "pyproject.toml")), "the SDK has no template pyproject.toml"

    wheels = os.path.join(tmp, "wheels")
    benv = dict(clean, CMAKE_PREFIX_PATH=prefix)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", wheels]

    # Left half-filled: CMake says which pyproject.toml line to change.
    half = os.path.join(tmp, "half")
    shutil.copytree(template, half)
    fill_in(half, "tmpl", pyproject_too=False)
    r = run(pip_wheel + [half], env=benv)
    out = re.sub(r"\s+", " ", r.stdout + r.stderr)
    assert r.returncode != 0, "a wheel was built from a pyproject.toml still naming CHANGE_ME"
    want = (f"pyproject.toml names the project 'spora_plugin_CHANGE_ME', but PLUGIN_NAME is 'tmpl': "
            f'set name = "spora-plugin-tmpl" in {half}/pyproject.toml')
    assert want in out, out[-3000:]
    print("half-filled template: refused with", repr(want[:60] + "..."))

    mine = os.path.join(tmp, "myplugin")
    shutil.copytree(template, mine)
    fill_in(mine, "tmpl")
    t1 = time.time()
    must(run(pip_wheel + [mine], env=benv), "pip wheel <template>")
    t2 = time.time()
    built = sorted(os.listdir(wheels))
    assert len(built) == 1 and re.fullmatch(r"spora_plugin_tmpl-0\.1\.0-py3-none-linux_\w+\.whl", built[0]), built
    whl = os.path.join(wheels, built[0])
    names = zipfile.ZipFile(whl).namelist()
    payload = sorted(n for n in names if ".dist-info/" not in n)
    assert payload == ["spora_plugin_tmpl/__init__.py", "spora_plugin_tmpl/libspora-device-tmpl.so"], payload
    entry = zipfile.ZipFile(whl).read("spora_plugin_tmpl-0.1.0.dist-info/entry_points.txt").decode()
    assert "[spora.plugins]" in entry and "tmpl = spora_plugin_tmpl" in entry, entry
    print(f"{built[0]}: {os.path.getsize(whl)} bytes, {payload} ({t2 - t1:.0f} s)")

    venv = os.path.join(tmp, "venv")
    must(run([sys.executable, "-m", "venv", venv]), "creating the venv")
    py = os.path.join(venv, "bin", "python")
    site = must(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]), "venv site").stdout.strip()
    if spora_src is None:
        # Development mode: the build tree's package, and this interpreter's
        # numpy alone (not its whole site-packages).
        deps = os.path.join(tmp, "deps")
        os.makedirs(deps)
        here = sysconfig.get_paths()["purelib"]
        for n in os.listdir(here):
            if n == "numpy" or n.startswith("numpy-") or n == "numpy.libs":
                os.symlink(os.path.join(here, n), os.path.join(deps, n))
        with open(os.path.join(site, "spora-dev.pth"), "w") as f:
            f.write(os.path.join(build, "python") + "\n" + deps + "\n")
        must(run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", whl]), "pip install the plugin wheel")
        spora_cmd = [py, "-m", "spora"]
    else:
        spora_wheels = os.path.join(tmp, "spora-wheels")
        env = dict(clean, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2"))
        ts = time.time()
        must(run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", spora_wheels,
                  spora_src], env=env), "pip wheel <spora source>")
        print(f"spora wheel: {os.listdir(spora_wheels)} ({time.time() - ts:.0f} s)")
        r = run([py, "-m", "pip", "install", "-q", "numpy"])
        if r.returncode != 0:
            print(f"SKIPPED: pip cannot install numpy into a fresh venv (no network?):\n{r.stderr[-2000:]}")
            return SKIP
        must(run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", spora_wheels, whl]),
             "pip install the plugin wheel (and spora, its dependency)")
        spora_cmd = [os.path.join(venv, "bin", "spora")]
    t3 = time.time()

    installed = os.path.join(site, "spora_plugin_tmpl", "libspora-device-tmpl.so")
    assert os.path.isfile(installed), os.listdir(site)
    r = must(run(spora_cmd + ["devices"], env=clean, cwd=tmp), "spora devices (venv)")
    print(r.stdout)
    lines = r.stdout.splitlines()
    at = [i for i, line in enumerate(lines) if line.split()[:2] == ["tmpl", "device"]]
    assert at, r.stdout
    assert " ok " in lines[at[0]] and os.path.realpath(lines[at[0]].split()[-1]) == os.path.realpath(installed), \
        lines[at[0]]
    assert lines[at[0] + 1].strip() == "origin: from Python package spora-plugin-tmpl 0.1.0", r.stdout
    assert "  tmpl:0" in lines, r.stdout

    # plugin check is the C++ tool's (the SDK prefix's bin/spora, on PATH);
    # the venv's spora hands it the venv's plugin packages. By name: the
    # tool finds the wheel's file itself.
    cenv = dict(clean, PATH=os.path.join(prefix, "bin") + os.pathsep + clean.get("PATH", ""))
    r = run(spora_cmd + ["plugin", "check", "tmpl", "--quick"], env=cenv, cwd=tmp, timeout=600)
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert re.search(r"^tmpl: CERTIFIED", r.stdout, re.M), r.stdout[-4000:]
    assert os.path.realpath(installed) in r.stdout + r.stderr or installed in r.stdout + r.stderr, \
        "plugin check did not say it checked the venv's file\n" + r.stdout[:2000]
    t4 = time.time()
    print(f"PASSED: SDK install + refusal {t1 - t0:.0f} s, template wheel {t2 - t1:.0f} s, venv + install "
          f"{t3 - t2:.0f} s, devices + plugin check {t4 - t3:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
