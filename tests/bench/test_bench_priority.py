"""``hvdkit bench`` raises its own and its jobs' CPU priority, checks the value, and says when it cannot."""

import errno
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


@pytest.mark.parametrize("bad", [1, 19, -21, True, 1.5, "x"])
def test_check_nice_names_the_option_and_the_value(bad):
    expected = r"--nice must be an integer from -20 \(highest priority\) to 0 \(normal\), got " + \
        repr(bad).replace(".", r"\.")
    with pytest.raises(ValueError, match=expected):
        priority.check_nice(bad)


@pytest.mark.parametrize("unprivileged", [False, True], ids=["root", "unprivileged"])
def test_raise_priority_sets_what_jobs_inherit_or_goes_on_and_says_why(unprivileged):
    if os.geteuid() != 0:
        pytest.skip("lowering a nice value needs CAP_SYS_NICE, dropping to a user needs root (CI runs as root)")
    drop = "os.setgid(65534); os.setuid(65534); " if unprivileged else ""
    proc = _child(f"import json, os; from hvdkit.bench import priority as p; {drop}s = p.raise_priority(-4); "
                  "print(json.dumps([s, p.job_env(), os.getpriority(os.PRIO_PROCESS, 0), os.getsid(0)]))")
    assert proc.returncode == 0, proc.stderr
    state, env, nice, sid = json.loads(proc.stdout)
    if unprivileged:
        assert state["raised"] is False and "CAP_SYS_NICE" in state["why"]
        assert env == {} and nice == 0
    else:
        assert state["raised"] is True and state["nice"] == -4 and nice == -4
        assert env == {"HVDKIT_BENCH_NICE": "-4", "HVDKIT_BENCH_SID": str(sid)} and sid != os.getsid(0)


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


def test_a_worker_leaves_the_drivers_session_alone():
    """A rank still in the driver's session (the caller's terminal, say) must not change that session's priority."""
    if os.geteuid() != 0:
        pytest.skip("lowering a nice value needs CAP_SYS_NICE (CI runs as root)")
    code = ("import json, os; os.environ['HVDKIT_BENCH_SID'] = str(os.getsid(0)); import hvdkit.bench.workers; "
            "from hvdkit.bench.priority import current_priority; print(json.dumps(current_priority()))")
    proc = _child(code, env={"HVDKIT_BENCH_NICE": "-3"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["session_nice"] in (0, None)


def test_a_rate_limited_session_change_is_retried_and_a_failed_one_said(monkeypatch, capsys):
    """Without CAP_SYS_ADMIN the kernel answers EAGAIN to a second change of a session's nice value within 100 ms
    (two torchrun ranks starting together): the rank tries again; any other error is said on stderr."""
    calls: list[int] = []

    def busy_twice(nice: int) -> None:
        calls.append(nice)
        if len(calls) <= 2:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(priority, "_write_session_nice", busy_twice)
    monkeypatch.setattr(priority.time, "sleep", lambda s: None)
    env = {"HVDKIT_BENCH_NICE": "-5", "HVDKIT_BENCH_SID": "-1"}
    assert priority.apply_session_nice(env) is True and calls == [-5, -5, -5]

    def refused(nice: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(priority, "_write_session_nice", refused)
    assert priority.apply_session_nice(env) is False
    err = capsys.readouterr().err
    assert "this rank's session keeps its priority: setting its nice value to -5" in err and "not permitted" in err


def test_report_counts_the_jobs_whose_sessions_ran_at_the_nice_value():
    from hvdkit.bench.report import job_sessions, priority_line

    prio = {"nice": -10, "raised": True, "autogroup": True}
    results = {"suites": {"a": {"runs": {"x": {"rounds": [{"priority": {"nice": -10, "session_nice": -10}},
                                                          {"priority": {"nice": -10, "session_nice": 0}}]}}},
                          "b": {"priority": {"nice": -10, "session_nice": -10}}}}
    assert sorted(job_sessions(results)) == [-10, -10, 0]
    assert "only 2 of 3 jobs' sessions (autogroup) were at nice -10" in priority_line(prio, job_sessions(results))
    results["suites"]["a"]["runs"]["x"]["rounds"].pop()
    assert "every job's session (autogroup) was at nice -10 (2 jobs)" in priority_line(prio, job_sessions(results))
    assert priority_line({"nice": 0, "raised": False, "why": "not asked for (--nice 0)"}).startswith(
        "Priority: normal")


def test_a_bad_nice_value_in_the_environment_is_named():
    proc = _child("import hvdkit.bench.workers", env={"HVDKIT_BENCH_NICE": "fast"})
    assert proc.returncode != 0
    assert "HVDKIT_BENCH_NICE must be an integer from -20 (highest priority) to 0 (normal), got 'fast'" in proc.stderr


def test_bench_rejects_a_bad_nice_before_running(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "bench", "allreduce", "--nice", "40", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert "--nice must be an integer from -20 (highest priority) to 0 (normal), got 40" in proc.stderr
    assert not (tmp_path / "out").exists()
