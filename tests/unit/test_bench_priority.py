"""``hvdkit bench`` raises its own and its jobs' CPU priority, checks the value, and says when it cannot."""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO

from hvdkit.bench import priority


def _child(code: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python in a session (autogroup) of its own: this process keeps its priority."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, start_new_session=True, **kw)


@pytest.mark.parametrize("bad", [20, -21, True, 1.5, "x"])
def test_check_nice_names_the_option_and_the_value(bad):
    expected = r"--nice must be an integer from -20 to 19, got " + repr(bad).replace(".", r"\.")
    with pytest.raises(ValueError, match=expected):
        priority.check_nice(bad)


def test_raise_priority_sets_this_process_and_what_its_jobs_inherit():
    if os.geteuid() != 0:
        pytest.skip("lowering a nice value needs CAP_SYS_NICE (CI runs as root)")
    proc = _child("import json, os; from hvdkit.bench import priority as p; s = p.raise_priority(-4); "
                  "print(json.dumps([s, p.job_env(), os.getpriority(os.PRIO_PROCESS, 0)]))")
    assert proc.returncode == 0, proc.stderr
    state, env, nice = json.loads(proc.stdout)
    assert state["raised"] is True and state["nice"] == -4 and nice == -4
    assert env == {"HVDKIT_BENCH_NICE": "-4"}


def test_raise_priority_without_permission_goes_on_and_says_why():
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    proc = _child("import json, os; from hvdkit.bench import priority as p; os.setgid(65534); os.setuid(65534); "
                  "s = p.raise_priority(-4); print(json.dumps([s, p.job_env(), os.getpriority(os.PRIO_PROCESS, 0)]))")
    assert proc.returncode == 0, proc.stderr
    state, env, nice = json.loads(proc.stdout)
    assert state["raised"] is False and "CAP_SYS_NICE" in state["why"]
    assert env == {} and nice == 0


def test_nice_zero_leaves_priority_alone():
    proc = _child("import json, os; from hvdkit.bench import priority as p; s = p.raise_priority(0); "
                  "print(json.dumps([s, p.job_env()]))")
    state, env = json.loads(proc.stdout)
    assert state["raised"] is False and "--nice 0" in state["why"] and env == {}


def test_a_worker_gives_its_session_the_nice_value_from_the_environment():
    """torchrun starts each rank in a session of its own: the rank itself sets its session's (autogroup) nice."""
    if os.geteuid() != 0:
        pytest.skip("lowering a nice value needs CAP_SYS_NICE (CI runs as root)")
    proc = _child("import json, hvdkit.bench.workers; from hvdkit.bench.priority import current_priority; "
                  "print(json.dumps(current_priority()))", env={"HVDKIT_BENCH_NICE": "-3"})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    if priority.AUTOGROUP_SWITCH.exists() and priority.AUTOGROUP_SWITCH.read_text().strip() == "1":
        assert got["session_nice"] == -3
    else:
        assert got["session_nice"] is None


def test_a_bad_nice_value_in_the_environment_is_named():
    proc = _child("import hvdkit.bench.workers", env={"HVDKIT_BENCH_NICE": "fast"})
    assert proc.returncode != 0
    assert "HVDKIT_BENCH_NICE must be an integer from -20 to 19, got 'fast'" in proc.stderr


def test_bench_rejects_a_bad_nice_before_running(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "bench", "allreduce", "--nice", "40", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert "--nice must be an integer from -20 to 19, got 40" in proc.stderr
    assert not (tmp_path / "out").exists()
