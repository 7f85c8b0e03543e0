"""Every fenced code block of README.md and docs/*.md is accounted for: run
here (Python blocks in one session per page, shell blocks one by one, in a
temporary directory, with the build tree's `spora` package and `spora`
tool), mirrored by a named test, or not run for a stated reason
(doc_blocks.py holds the verdicts). A block is known by a hash of its text,
so a new or edited block fails here until it is given a verdict again.

Blocks must carry a language: `text` (or `mermaid`) marks output, diagrams
and pseudo-code, which are not registered; an untagged fence fails.

Environment (tests/CMakeLists.txt, test docs_blocks): PYTHONPATH (the build
tree's python/), SPORA_LIB, SPORA_CLI (the `spora` tool), SPORA_SOURCE_DIR,
SPORA_BUILD_DIR.
"""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import doc_blocks as V  # noqa: E402  (the verdicts)

SRC = os.environ.get("SPORA_SOURCE_DIR", os.path.normpath(os.path.join(HERE, "..", "..")))
NOT_CODE = {"text", "mermaid"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


class Block:
    def __init__(self, page, line, lang, body):
        self.page, self.line, self.lang, self.body = page, line, lang, body
        self.key = V.key(body)

    def __repr__(self):
        return f"{self.page}:{self.line}"


def extract():
    pages = ["README.md"] + sorted(os.path.relpath(p, SRC) for p in glob.glob(os.path.join(SRC, "docs", "*.md")))
    blocks = []
    for page in pages:
        with open(os.path.join(SRC, page), encoding="utf-8") as f:
            lines = f.read().split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            indent, fence, lang = m.groups()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            if j == len(lines):
                raise AssertionError(f"{page}:{i + 1}: a code fence that is never closed")
            body = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j])
            blocks.append(Block(page, i + 1, lang.lower(), body))
            i = j + 1
    return blocks


BLOCKS = extract()
CODE = [b for b in BLOCKS if b.lang not in NOT_CODE]


def test_every_fence_has_a_language():
    untagged = [repr(b) for b in BLOCKS if not b.lang]
    assert not untagged, ("code fences without a language (```text for output, diagrams and pseudo-code; "
                          f"```sh, ```python, ... for code): {', '.join(untagged)}")


def test_every_code_block_has_a_verdict():
    missing = []
    for b in CODE:
        if b.key not in V.VERDICTS:
            first = b.body.strip().split("\n")[0][:70]
            missing.append(f"  {b!r} [{b.lang}] key {b.key!r}: {first}")
    assert not missing, ("new or changed code blocks: run each (run()), name the test that "
                         "mirrors it (mirror()) or say why it is not run (skip()) in tests/docs/doc_blocks.py:\n"
                         + "\n".join(missing))


def test_verdicts_are_all_used():
    keys = {b.key for b in CODE}
    stale = [k for k in V.VERDICTS if k not in keys]
    assert not stale, f"verdicts for blocks no longer in the docs (remove them from doc_blocks.py): {stale}"


def test_mirrors_name_registered_tests():
    """A mirror names a test this build's ctest lists, and files that exist."""
    build = os.environ.get("SPORA_BUILD_DIR")
    if not build:
        pytest.skip("SPORA_BUILD_DIR not set (ctest sets it)")
    r = subprocess.run(["ctest", "--test-dir", build, "-N"], capture_output=True, text=True, check=True)
    tests = set(re.findall(r"Test +#\d+: (\S+)", r.stdout))
    for key, v in V.VERDICTS.items():
        if v.kind != "mirror":
            continue
        assert v.test in tests, f"verdict {key}: ctest has no test {v.test}"
        for path in v.files:
            assert os.path.exists(os.path.join(SRC, path)), f"verdict {key}: {path} (mirroring the block) is missing"


def _env(tmp):
    env = dict(os.environ)
    cli = env.get("SPORA_CLI")
    if cli:
        env["PATH"] = os.path.dirname(cli) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), os.path.join(SRC, "tests", "python")]))
    env["SPORA_DOCS_SOURCE"] = SRC
    env["HOME"] = str(tmp)  # nothing the blocks write lands in the user's home
    return env


def _missing_tools(v):
    return [t for t in v.needs if shutil.which(t) is None and not (t == "spora" and os.environ.get("SPORA_CLI"))]


PY_PAGES = sorted({b.page for b in CODE if b.lang == "python" and V.VERDICTS.get(b.key, V.NONE).kind == "run"})


@pytest.mark.parametrize("page", PY_PAGES)
def test_python_blocks_run(page, tmp_path):
    """The page's runnable Python blocks, in page order, in one interpreter
    and one namespace (a later block uses what an earlier one defined, as a
    reader would), each after its setup and followed by its checks."""
    blocks = [b for b in CODE if b.page == page and b.lang == "python"
              and V.VERDICTS.get(b.key, V.NONE).kind == "run"]
    parts = ["import sys, traceback\n_ns = {'__name__': '__main__'}\n"]
    for b in blocks:
        v = V.VERDICTS[b.key]
        for label, code in (("setup", v.setup), ("block", b.body), ("check", v.check)):
            if not code:
                continue
            parts.append(f"print('--- {b!r} {label}', flush=True)\n"
                         f"exec(compile({textwrap.dedent(code)!r}, {f'{b!r} ({label})'!r}, 'exec'), _ns)\n")
    script = tmp_path / "session.py"
    script.write_text("".join(parts))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"{page}: a block failed (the last '---' line says which):\n{r.stdout[-3000:]}\n" \
                              f"{r.stderr[-4000:]}"


SH = [b for b in CODE if b.lang in ("sh", "bash", "shell", "console") and
      V.VERDICTS.get(b.key, V.NONE).kind == "run"]


@pytest.mark.parametrize("block", SH, ids=[repr(b) for b in SH])
def test_shell_blocks_run(block, tmp_path):
    v = V.VERDICTS[block.key]
    missing = _missing_tools(v)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    env = _env(tmp_path)
    if v.setup:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(v.setup)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{block!r}: its setup failed:\n{r.stderr[-3000:]}"
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"{block!r} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    if v.check:
        r2 = subprocess.run([sys.executable, "-c", textwrap.dedent(v.check)], cwd=tmp_path, env=env,
                            input=r.stdout, capture_output=True, text=True, timeout=120)
        assert r2.returncode == 0, f"{block!r}: its check failed:\n{r2.stderr[-3000:]}\nthe output:\n{r.stdout[-3000:]}"


def test_plugin_guide_template_configures_once_named(tmp_path):
    """docs/plugin-guide.md's first steps, literally: copy the template, name
    it with the guide's own `sed` line. Configuring must then get past the
    "not yet filled in" check to find_package(Spora), which fails here on
    purpose (no installed Spora under the prefix given); sdk_install runs
    the whole walk against an installed prefix."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("needs cmake")
    guide = next(b for b in CODE if b.page == "docs/plugin-guide.md" and "share/spora/template" in b.body)
    sed = next(ln for ln in guide.body.split("\n") if ln.startswith("sed "))
    shutil.copytree(os.path.join(SRC, "sdk", "template"), tmp_path / "myaccel")
    subprocess.run(["bash", "-c", sed], cwd=tmp_path / "myaccel", check=True)
    r = subprocess.run([cmake, "-S", ".", "-B", "build", f"-DCMAKE_PREFIX_PATH={tmp_path / 'nowhere'}"],
                       cwd=tmp_path / "myaccel", capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "not yet filled in" not in out, out
    assert 'provided by "Spora"' in out or "Spora_DIR" in out, out
    # Unnamed, it still stops and says where.
    shutil.copytree(os.path.join(SRC, "sdk", "template"), tmp_path / "unnamed")
    r = subprocess.run([cmake, "-S", ".", "-B", "build"], cwd=tmp_path / "unnamed", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "not yet filled in" in r.stdout + r.stderr
