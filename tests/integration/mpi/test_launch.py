"""spora launch (frontends/cli/launch.cpp): ranks over mpirun, each line
prefixed with its rank, the per-rank environment, and the exit status and
message naming the first rank that failed. Run by ctest cli_launch (not
under mpirun: the test starts the launcher itself); SPORA_CLI is the tool."""
import os
import subprocess
import sys

import pytest

CLI = os.environ.get("SPORA_CLI", "spora")


def launch(n, code, *extra, timeout=120):
    return subprocess.run([CLI, "launch", "-n", str(n), *extra, "--", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=timeout)


def test_every_rank_runs_with_its_environment_and_prefixed_output():
    r = launch(3, "import os, sys\n"
                  "print('env', os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'],"
                  " os.environ['LOCAL_WORLD_SIZE'], os.environ['SPORA_NUM_THREADS'])\n"
                  "print('to stderr', file=sys.stderr)\n"
                  "print('no newline at the end', end='')\n")
    assert r.returncode == 0, r.stderr
    cores = os.cpu_count() or 1
    for rank in range(3):
        assert f"[rank {rank}] env {rank} 3 {rank} 3 {max(1, cores // 3)}" in r.stdout, r.stdout
        assert f"[rank {rank}] no newline at the end" in r.stdout, r.stdout
        assert f"[rank {rank}] to stderr" in r.stderr, r.stderr
    assert "failed" not in r.stderr


def test_the_first_failing_rank_is_named_and_its_code_returned():
    r = launch(4, "import os, sys, time\n"
                  "if os.environ['RANK'] == '2':\n"
                  "    time.sleep(0.3); print('rank two gives up'); sys.exit(3)\n"
                  "time.sleep(60)\n")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "[rank 2] rank two gives up" in r.stdout
    assert "spora launch: rank 2 failed first: it exited with code 3" in r.stderr, r.stderr


def test_a_killed_rank_is_named_with_its_signal():
    r = launch(2, "import os, signal, time\n"
                  "if os.environ['RANK'] == '1':\n"
                  "    time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)\n"
                  "time.sleep(60)\n")
    assert r.returncode == 128 + 9, (r.stdout, r.stderr)
    assert "spora launch: rank 1 failed first: it was killed by signal 9" in r.stderr, r.stderr


@pytest.mark.parametrize("args,message", [
    (["launch", "--", "true"], "give the number of ranks with -n N"),
    (["launch", "-n", "2"], "no program given"),
    (["launch", "-n", "zero", "--", "true"], "-n wants a rank count, got 'zero'"),
    (["launch", "--bogus", "--", "true"], "unknown option '--bogus'"),
])
def test_usage_errors(args, message):
    r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert message in r.stderr, r.stderr


def test_a_missing_mpirun_says_what_to_install():
    r = subprocess.run([CLI, "launch", "-n", "2", "--mpirun", "/nonexistent/mpirun", "--", "true"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "apt install openmpi-bin" in r.stderr, r.stderr
