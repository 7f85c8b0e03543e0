"""Plugins installed as Python packages (entry points "spora.plugins",
spora/_plugin_packages.py): found at import, listed with their origin by
`python -m spora devices`, and a plugin built for another ABI major is
refused with the pip command that fixes it.

Each case builds a fake installed distribution in tmp_path (a .dist-info
with entry_points.txt, and a module directory holding plugin files copied
from the build tree) and runs a fresh interpreter with it on sys.path."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import spora

BUILD = os.path.dirname(os.path.dirname(os.environ.get("SPORA_LIB", "")))
HOSTILE = os.path.join(BUILD, "tests", "loader", "hostile")


def _fake_dist(root, dist, version, module, entry, files):
    pkg = root / module
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def plugin_paths():\n    import os\n"
                                     "    return [os.path.dirname(os.path.abspath(__file__))]\n")
    for f in files:
        shutil.copy(f, pkg)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[spora.plugins]\n{entry}\n")
    return pkg


def _run(tmp_path, code, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SPORA_PLUGIN_PATH", None)
    cmd = [sys.executable] + (["-c", textwrap.dedent(code)] if code else list(args))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _plugin(name):
    p = os.path.join(HOSTILE, f"libspora-device-{name}.so")
    if not os.path.exists(p):
        pytest.skip(f"{p} is not built (tests/loader)")
    return p


def test_entry_point_module_directory_is_searched(tmp_path):
    pkg = _fake_dist(tmp_path, "spora-plugin-good", "0.3.0", "spora_plugin_good",
                     "good = spora_plugin_good", [_plugin("good")])
    r = _run(tmp_path, f"""
        import sys, spora
        from spora import _plugin_packages
        # Finding the directory of a module entry point does not import it.
        assert "spora_plugin_good" not in sys.modules, "imported"
        found = [p for p in spora._C.plugins() if p["name"] == "good"]
        assert found and found[0]["available"], found
        assert found[0]["path"].startswith({str(pkg)!r}), found
        assert _plugin_packages.package_of(found[0]["path"]).dist == "spora-plugin-good"
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    r = _run(tmp_path, None, "-m", "spora", "devices")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["good"])
    assert "ok" in lines[at] and str(pkg) in lines[at], r.stdout
    assert lines[at + 1].strip() == "origin: from Python package spora-plugin-good 0.3.0", r.stdout
    cpu = next(i for i, line in enumerate(lines) if line.split()[:1] == ["cpu"])
    assert lines[cpu + 1].strip() != "origin: from Python package spora-plugin-good 0.3.0", r.stdout


def test_callable_entry_point(tmp_path):
    _fake_dist(tmp_path, "spora-plugin-good", "0.3.0", "spora_plugin_good",
               "good = spora_plugin_good:plugin_paths", [_plugin("good")])
    r = _run(tmp_path, """
        import spora
        assert any(p["name"] == "good" and p["available"] for p in spora._C.plugins()), spora._C.plugins()
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_other_abi_major_names_versions_and_pip_fix(tmp_path):
    _fake_dist(tmp_path, "spora-plugin-badmajor", "9.0.0", "spora_plugin_badmajor",
               "badmajor = spora_plugin_badmajor", [_plugin("badmajor")])
    r = _run(tmp_path, """
        import spora
        info = [d for d in spora.devices(all=True) if d == "badmajor"]
        assert info and not info[0].available, info
        print(info[0].reason)
        try:
            spora.set_device("badmajor")
        except spora.BackendUnavailableError as e:
            assert "pip install -U spora-plugin-badmajor" in str(e), str(e)
        else:
            raise SystemExit("set_device('badmajor') did not raise")
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    msg = r.stdout
    assert "plugin ABI 2.0" in msg and "speaks 1.x" in msg, msg
    assert "from Python package spora-plugin-badmajor 9.0.0" in msg, msg
    assert "pip install -U spora-plugin-badmajor" in msg and spora.__version__ in msg, msg


def test_broken_entry_point_warns_and_import_goes_on(tmp_path):
    info = tmp_path / "spora_plugin_gone-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: spora-plugin-gone\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[spora.plugins]\ngone = spora_plugin_gone_module\n")
    r = _run(tmp_path, """
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import spora
        assert any("spora-plugin-gone" in str(x.message) and "not installed" in str(x.message) for x in w), \\
            [str(x.message) for x in w]
        assert "cpu" in spora.devices()
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_spora_plugin_path_keeps_precedence(tmp_path):
    pkgroot = tmp_path / "site"
    pkgroot.mkdir()
    _fake_dist(pkgroot, "spora-plugin-good", "0.3.0", "spora_plugin_good",
               "good = spora_plugin_good", [_plugin("good")])
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(_plugin("good"), mine)
    env = dict(os.environ, SPORA_PLUGIN_PATH=str(mine))
    env["PYTHONPATH"] = str(pkgroot) + os.pathsep + env.get("PYTHONPATH", "")
    code = textwrap.dedent("""
        import spora
        good = [p for p in spora._C.plugins() if p["name"] == "good"]
        used = [p for p in good if p["available"] and "not used" not in p["reason"]]
        print(used[0]["path"] if used else good)
    """)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().startswith(str(mine)), r.stdout


def test_other_subcommands_go_to_the_cpp_tool(tmp_path):
    tool_dir = os.path.join(BUILD, "bin")
    if not os.path.exists(os.path.join(tool_dir, "spora")):
        pytest.skip("the C++ tool is not built")
    env = dict(os.environ, PATH=tool_dir + os.pathsep + "/usr/bin:/bin")
    r = subprocess.run([sys.executable, "-m", "spora", "--help"], env=env, capture_output=True, text=True)
    assert "SPORA_PLUGIN_PATH (extra plugin dirs)" in r.stdout + r.stderr, r.stdout + r.stderr
    env["PATH"] = "/usr/bin:/bin"
    r = subprocess.run([sys.executable, "-m", "spora", "run"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "'run' is not available from the pip package" in r.stderr, r.stderr


def _nvidia_site(root):
    """A site-packages as NVIDIA's CUDA 13 pip wheels leave it (their RECORD
    files: nvidia/cu13/lib/libcublas.so.13, nvidia/cudnn/lib/libcudnn.so.9,
    nvidia/nccl/lib/libnccl.so.2); `nvidia` is a namespace package."""
    for part in ("nccl", "cu13", "cudnn"):
        (root / "nvidia" / part / "lib").mkdir(parents=True)
    (root / "nvidia" / "cuda_cccl" / "include").mkdir(parents=True)  # a part without lib/
    return [str(root / "nvidia" / p / "lib") for p in ("cu13", "cudnn", "nccl")]


def test_nvidia_wheel_directories_reach_the_plugins(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    dirs = _nvidia_site(first) + _nvidia_site(second)
    env = dict(os.environ)
    env.pop("SPORA_NVIDIA_LIBRARY_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join([str(first), str(second), env.get("PYTHONPATH", "")])
    code = "import os, sys, spora; assert 'nvidia' not in sys.modules; print(os.environ['SPORA_NVIDIA_LIBRARY_PATH'])"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().split(os.pathsep) == dirs, r.stdout
    # A value the user set is left alone; without wheels, nothing is set.
    env["SPORA_NVIDIA_LIBRARY_PATH"] = "/opt/mine"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "/opt/mine", r.stdout + r.stderr
    env.pop("SPORA_NVIDIA_LIBRARY_PATH")
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", "import os, spora; print(os.environ.get('SPORA_NVIDIA_LIBRARY_PATH'))"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stdout + r.stderr
