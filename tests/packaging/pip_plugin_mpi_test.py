"""`pip install spora spora-plugin-mpi` into a fresh venv, then a 2-rank
all-reduce under mpirun from that venv alone (issue 23).

  pip_plugin_mpi_test.py <source dir> <work dir> <mpirun>

Builds both wheels the way a user does (`pip wheel`; the spora wheel from
the top-level pyproject.toml, the plugin from
packaging/python/spora-plugin-mpi), with this interpreter's scikit-build-core
and nanobind (no build isolation: no download of build tools). numpy comes
from PyPI or pip's cache. Exits 77 (skipped) when the build tools are
missing or pip cannot get numpy, saying which."""
import os
import shutil
import subprocess
import sys
import time

SKIP = 77


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(r, what):
    if r.returncode != 0:
        sys.exit(f"FAILED: {what} (exit {r.returncode})\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def main():
    src, work, mpirun = sys.argv[1:4]
    for mod in ("scikit_build_core", "nanobind"):
        if run([sys.executable, "-c", f"import {mod}"]).returncode != 0:
            print(f"SKIPPED: {sys.executable} lacks {mod} (packaging/install-deps.sh installs it)")
            return SKIP
    t0 = time.time()
    wheels = os.path.join(work, "wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2"))
    must(run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", wheels,
              src, os.path.join(src, "packaging", "python", "spora-plugin-mpi")], env=env), "building the wheels")
    t1 = time.time()
    built = sorted(os.listdir(wheels))
    print("wheels:", built, f"({t1 - t0:.0f} s)")
    plugin_whl = [w for w in built if w.startswith("spora_plugin_mpi-")]
    assert plugin_whl, built
    # The plugin wheel holds the plugin and its module, nothing of core.
    import zipfile
    names = zipfile.ZipFile(os.path.join(wheels, plugin_whl[0])).namelist()
    payload = [n for n in names if ".dist-info/" not in n]
    assert sorted(payload) == ["spora_plugin_mpi/__init__.py", "spora_plugin_mpi/libspora-collective-mpi.so"], payload

    venv = os.path.join(work, "venv")
    shutil.rmtree(venv, ignore_errors=True)
    must(run([sys.executable, "-m", "venv", venv]), "creating the venv")
    py = os.path.join(venv, "bin", "python")
    r = run([py, "-m", "pip", "install", "-q", "numpy"])
    if r.returncode != 0:
        print(f"SKIPPED: pip cannot install numpy into a fresh venv (no network?):\n{r.stderr[-2000:]}")
        return SKIP
    # spora comes from the wheel directory (the plugin requires it).
    must(run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheels, "spora-plugin-mpi"]),
         "pip install spora-plugin-mpi")
    t2 = time.time()

    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "SPORA_PLUGIN_PATH", "SPORA_LIB", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    r = must(run([os.path.join(venv, "bin", "spora"), "devices"], env=clean, cwd=work), "spora devices")
    print(r.stdout)
    lines = r.stdout.splitlines()
    at = [i for i, line in enumerate(lines) if line.split()[:2] == ["mpi", "collective"]]
    assert at, r.stdout
    line = lines[at[0]]
    assert " ok " in line and os.path.realpath(venv) in os.path.realpath(line.split()[-1]), line
    assert lines[at[0] + 1].strip() == "origin: from Python package spora-plugin-mpi 0.1.0", r.stdout

    code = (
        "import os, numpy as np, spora\n"
        "from spora import communication as comm\n"
        f"assert os.path.realpath(spora.__file__).startswith({os.path.realpath(venv)!r}), spora.__file__\n"
        "comm.init('mpi', timeout_ms=60000)\n"
        "r, n = comm.get_rank(), comm.get_group_size()\n"
        "assert n == 2, n\n"
        "y = comm.all_reduce(spora.Tensor(np.arange(6, dtype=np.float32) * (r + 1))).asnumpy()\n"
        "np.testing.assert_array_equal(y, np.arange(6, dtype=np.float32) * 3)\n"
        "comm.release()\n"
        "print('rank', r, 'all_reduce OK', flush=True)\n")
    clean.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                 OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
                 SPORA_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    r = must(run([mpirun, "-np", "2", "--oversubscribe", py, "-c", code], env=clean, cwd=work, timeout=300),
             "the 2-rank all-reduce")
    print(r.stdout)
    assert r.stdout.count("all_reduce OK") == 2, r.stdout + r.stderr
    t3 = time.time()
    print(f"PASSED: wheels {t1 - t0:.0f} s, venv + install {t2 - t1:.0f} s, devices + all-reduce {t3 - t2:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
