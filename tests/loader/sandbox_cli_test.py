"""The probe sandbox seen from `spora devices` and `import spora`: the
hostile plugins (tests/loader/plugins/misbehaves.c) beside good and a copy
of sim on SPORA_PLUGIN_PATH. Each program exits 0, lists every hostile
plugin with its reason, uses the good ones; its second start takes every
verdict from the cache (no probe process, no hostile step runs again).

Environment (set by ctest): SPORA_CLI, SPORA_LOADER_TEST_PLUGIN_DIR,
SPORA_SIM_PLUGIN, PYTHONPATH (the build tree's spora package)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HOSTILE = {
    "ctorsegv": "killed by SIGSEGV in the constructor (dlopen)",
    "probeabort": "killed by SIGABRT in spora_plugin_probe_v1",
    "entryexit": "exited with status 3 in spora_plugin_entry_v1",
    "probehang": "timed out after 1 s in spora_plugin_probe_v1",
    "entrysegv": "killed by SIGSEGV in spora_plugin_entry_v1",
}
FRESH = "(seen in a probe process; not loaded)"
CACHED = "(verdict cached in "

# Run by `python -c` with the scenario's environment; prints one JSON line.
PYTHON_START = r"""
import json, os, spora
devs = spora.devices(all=True)
t = spora.tensor([1.0, 2.0, 3.0], device="sim:0")
s = (t + t).numpy().tolist()
me = str(os.getpid())
left = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    comm_end = stat.rfind(")")
    state, ppid = stat[comm_end + 2:].split()[:2]
    if ppid == me and (state == "Z" or "(spora-plugin-pr" in stat):
        left.append(stat[:comm_end + 1] + " " + state)
print(json.dumps({"devices": [[str(d), d.available, d.reason] for d in devs], "sum": s, "left": left}))
"""

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def plugin_file(name):
    return f"libspora-device-{name}.so"


def steps_run(log):
    counts = {}
    if os.path.exists(log):
        for line in open(log):
            counts[line.split()[0]] = counts.get(line.split()[0], 0) + 1
    return counts


def scenario(root):
    plugins = os.path.join(root, "plugins")
    os.makedirs(plugins)
    built = os.environ["SPORA_LOADER_TEST_PLUGIN_DIR"]
    for name in ["good", *HOSTILE]:
        shutil.copy(os.path.join(built, plugin_file(name)), plugins)
    shutil.copy(os.environ["SPORA_SIM_PLUGIN"], os.path.join(plugins, plugin_file("sim")))
    env = dict(os.environ)
    env.update(SPORA_PLUGIN_PATH=plugins, SPORA_PLUGIN_CACHE_DIR=os.path.join(root, "cache"),
               SPORA_PLUGIN_PROBE_TIMEOUT_S="1", SPORA_TEST_MISBEHAVE_LOG=os.path.join(root, "misbehave.log"),
               SPORA_LOG_LEVEL="debug")
    env.pop("SPORA_PLUGIN_SANDBOX", None)
    return plugins, env


def probe_counts(stderr):
    m = re.search(r"probe sandbox: (\d+) probe process\(es\) started, (\d+) verdict\(s\) from the cache", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


def cli_start(plugins, env, source):
    r = subprocess.run([os.environ["SPORA_CLI"], "devices"], env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"spora devices exited {r.returncode}: {r.stdout}{r.stderr}")
    for name, reason in HOSTILE.items():
        path = os.path.join(plugins, plugin_file(name))
        want = re.compile(rf"^  {name} +device +UNAVAILABLE +{re.escape(path)}\n +reason: \[loader\] "
                          rf"{re.escape(plugin_file(name))}: {re.escape(reason)} {re.escape(source)}", re.M)
        check(want.search(r.stdout), f"spora devices: {name} not listed with '{reason} {source}':\n{r.stdout}")
    for name in ("good", "sim"):
        path = os.path.join(plugins, plugin_file(name))
        check(re.search(rf"^  {name} +device +ok +{re.escape(path)}$", r.stdout, re.M),
              f"spora devices: {name} from {plugins} is not ok:\n{r.stdout}")
    check(re.search(r"^  good:0$", r.stdout, re.M), f"spora devices: no good:0:\n{r.stdout}")
    return probe_counts(r.stderr), r


def python_start(env, source):
    r = subprocess.run([sys.executable, "-c", PYTHON_START], env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"python exited {r.returncode}: {r.stdout}{r.stderr}")
    if r.returncode != 0:
        return None
    import json
    got = json.loads(r.stdout.strip().splitlines()[-1])
    names = {d[0]: d for d in got["devices"]}
    for name, reason in HOSTILE.items():
        d = names.get(name)
        check(d is not None and d[1] is False and f"{reason} {source}" in d[2],
              f"import spora: {name} not listed with '{reason} {source}': {d}")
    check("good:0" in names and "sim:0" in names, f"import spora: good:0 or sim:0 missing: {list(names)}")
    check(got["sum"] == [2.0, 4.0, 6.0], f"import spora: sim:0 computed {got['sum']}")
    check(got["left"] == [], f"import spora: children left behind: {got['left']}")
    return probe_counts(r.stderr)


def main():
    with tempfile.TemporaryDirectory(prefix="spora-sandbox-cli-") as root:
        root = os.path.realpath(root)
        plugins, env = scenario(root)
        log = env["SPORA_TEST_MISBEHAVE_LOG"]
        once = {name: 1 for name in HOSTILE}

        counts, first = cli_start(plugins, env, FRESH)
        check(counts is not None and counts[0] >= 7, f"spora devices, first start: probe counts {counts}:\n{first.stderr}")
        check(steps_run(log) == once, f"hostile steps after the first start: {steps_run(log)}")
        counts, second = cli_start(plugins, env, CACHED)
        check(counts is not None and counts[0] == 0, f"spora devices, second start started probes: {counts}:\n{second.stderr}")
        check(steps_run(log) == once, f"hostile steps after the second start: {steps_run(log)}")

        # import spora: its own cache, first and second start.
        env["SPORA_PLUGIN_CACHE_DIR"] = os.path.join(root, "cache-python")
        os.remove(log)
        counts = python_start(env, FRESH)
        check(counts is not None and counts[0] >= 7, f"import spora, first start: probe counts {counts}")
        check(steps_run(log) == once, f"hostile steps after import spora: {steps_run(log)}")
        counts = python_start(env, CACHED)
        check(counts == (0, counts[1] if counts else -1) and counts[1] >= 7,
              f"import spora, second start: probe counts {counts}")
        check(steps_run(log) == once, f"hostile steps after the second import spora: {steps_run(log)}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("sandbox: spora devices and import spora survive every hostile plugin; second starts use the cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
