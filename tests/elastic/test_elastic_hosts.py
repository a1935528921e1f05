"""Elastic jobs whose discovered hosts go wrong while they run (hvdkit's patch 0009 to Horovod's elastic driver):
every host removed, so the job is below --min-np, and a host that cannot be reached added to a running job.

The horovodrun tests edit the hosts file the discovery script prints, after the first step; the worker paces
its steps (--step-seconds) so that the job is still running when the driver notices. The others drive the
patched driver pieces in this process."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import REPO, WORKERS, read_json, requires_horovod

from hvdkit.tools.elastic_local import command, write_discovery

pytestmark = [requires_horovod, pytest.mark.timeout(180)]


class Discovery:
    """A discovery "script" the test sets: host -> slots."""

    def __init__(self, slots=None):
        self.slots = dict(slots or {})

    def find_available_hosts_and_slots(self):
        return dict(self.slots)


def test_each_new_host_is_checked_once_and_one_that_fails_is_blacklisted(capsys):
    from horovod.runner.elastic.discovery import HostManager

    checked = []

    def check(host):
        checked.append(host)
        return "ssh: Could not resolve hostname bad" if host == "bad" else None

    disc = Discovery({"a": 1})
    hosts = HostManager(disc, host_check=check)
    hosts.update_available_hosts()
    disc.slots = {"a": 1, "bad": 1}
    hosts.update_available_hosts()
    assert hosts.current_hosts.host_assignment_order == ["a"] and hosts.is_blacklisted("bad")
    disc.slots = {"a": 2, "bad": 1, "c": 1}  # more slots on a known host: only the new one is checked
    hosts.update_available_hosts()
    assert checked == ["a", "bad", "c"] and hosts.current_hosts.host_assignment_order == ["a", "c"]
    assert ("host bad cannot start workers, blacklisted (not used again in this job): "
            "ssh: Could not resolve hostname bad") in capsys.readouterr().err


def test_a_blacklisted_host_is_checked_again_after_its_cooldown(monkeypatch, capsys):
    from horovod.runner.elastic import discovery

    now = [1000.0]
    monkeypatch.setattr(discovery.time, "time", lambda: now[0])
    reachable = {"b": False}
    checked = []

    def check(host):
        checked.append(host)
        return None if reachable.get(host, True) else "no route"

    hosts = discovery.HostManager(Discovery({"a": 1, "b": 1}), cooldown_range=(1, 2), host_check=check)
    hosts.update_available_hosts()
    assert hosts.current_hosts.host_assignment_order == ["a"]
    assert "checked again after its --blacklist-cooldown-range cooldown" in capsys.readouterr().err
    hosts.update_available_hosts()  # in its cooldown: not checked
    now[0] += 3  # past the cooldown (at most 2 s): checked again, still failing
    hosts.update_available_hosts()
    assert hosts.current_hosts.host_assignment_order == ["a"] and sorted(checked) == ["a", "b", "b"]
    reachable["b"] = True
    now[0] += 3
    hosts.update_available_hosts()
    assert hosts.current_hosts.host_assignment_order == ["a", "b"] and not hosts.is_blacklisted("b")


def test_the_ssh_check_skips_this_machine_and_reports_what_ssh_said():
    from argparse import Namespace

    from horovod.runner.gloo_run import _ssh_host_check

    check = _ssh_host_check(Namespace(ssh_port=None, ssh_identity_file=None), connect_timeout_s=5)
    assert check("localhost") is None and check("127.0.0.1") is None
    reason = check("nohost.invalid")
    assert "exited with 255" in reason and "Could not resolve hostname nohost.invalid" in reason, reason


def test_waiting_below_min_np_is_said_at_once_and_the_timeout_message_is_formatted(capsys):
    from horovod.runner.common.util.timeout import TimeoutException
    from horovod.runner.elastic.driver import ElasticDriver

    class Rendezvous:
        def stop(self):
            pass

    driver = ElasticDriver(Rendezvous(), Discovery({"a": 1}), min_num_proc=2, max_num_proc=2, timeout=1)
    try:
        with pytest.raises(TimeoutException) as err:
            driver.wait_for_available_slots(2)
    finally:
        driver.stop()
    said = capsys.readouterr().err
    assert ("Elastic job waiting for 2 slots to start: 1 slots available on hosts ['a']. Waiting up to 1 s "
            "for the host discovery script to report 2 slots, then the job fails "
            "(--elastic-timeout or HOROVOD_ELASTIC_TIMEOUT sets the wait).") in said
    assert str(err.value).startswith("Timed out waiting for minimum number of slots to become available. "
                                     "Please check that you have enough resources to run at least 2 Horovod")


class Job:
    """A ``horovodrun`` elastic job whose output lines are read as they come, with the time each arrived."""

    def __init__(self, tmp_path, np, max_np, epochs, env):
        self.results = tmp_path / "results"
        self.results.mkdir()
        self.hosts_file, script = write_discovery(tmp_path / "disc", hosts=("localhost",))
        cmd = command(np, 1, script, [sys.executable, str(WORKERS / "torch_elastic.py"),
                                      "--results", str(self.results), "--epochs", str(epochs),
                                      "--step-seconds", "0.05"])
        cmd[cmd.index("--max-np") + 1] = str(max_np)
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True,
                                     env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", **env})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._changed.notify_all()
        with self._changed:
            self.lines.append((time.monotonic(), None))  # end of output
            self._changed.notify_all()

    def wait_for(self, pattern, timeout):
        """(time, line) of the first output line matching ``pattern``; fails after ``timeout`` s or at the end."""
        rx = re.compile(pattern)

        def found():
            return next(((t, s) for t, s in self.lines if s is None or rx.search(s)), None)

        with self._changed:
            hit = self._changed.wait_for(found, timeout)
        assert hit and hit[1] is not None, f"no line matching {pattern!r} within {timeout} s:\n{self.output()[-4000:]}"
        return hit

    def finish(self, timeout):
        rc = self.proc.wait(timeout)
        self._reader.join(30)
        return rc

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def output(self):
        return "\n".join(s for _, s in self.lines if s is not None)


@pytest.mark.horovod
def test_every_host_removed_says_at_once_that_the_job_is_below_min_np(tmp_path):
    elastic_timeout = 6  # the wait below --min-np after the removal (the start finds its one slot at once)
    job = Job(tmp_path, np=1, max_np=1, epochs=1000, env={"HOROVOD_ELASTIC_TIMEOUT": str(elastic_timeout)})
    try:
        job.wait_for(r"\[step\] \d+ size 1", 120)
        removed = time.monotonic()
        job.hosts_file.write_text("")
        said, line = job.wait_for(r"below --min-np", elastic_timeout + 60)
        rc = job.finish(elastic_timeout + 60)
    finally:
        job.stop()
    out = job.output()
    print(f"below --min-np: said after {said - removed:.1f} s: {line}")
    assert "below --min-np 1: 0 slots available" in line
    assert f"Waiting up to {elastic_timeout} s" in line
    assert "--elastic-timeout or HOROVOD_ELASTIC_TIMEOUT" in line
    timed_out, _ = job.wait_for(r"Timed out waiting for minimum number of slots to become available", 0)
    assert said < timed_out  # said at once, not when the wait ended
    assert rc != 0 and "{activity}" not in out, out[-4000:]


@pytest.mark.horovod
def test_an_unreachable_host_added_is_blacklisted_and_the_survivor_trains_on(tmp_path):
    epochs = 8  # about 10 s of steps at 0.05 s a step: the driver polls the discovery script every second
    # A survivor waiting in Gloo's rendezvous for a worker that never starts aborts after this timeout.
    job = Job(tmp_path, np=1, max_np=2, epochs=epochs, env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "10"})
    try:
        job.wait_for(r"\[step\] \d+ size 1", 120)
        job.hosts_file.write_text("localhost:1\nnohost.invalid:1\n")
        _, line = job.wait_for(r"host nohost\.invalid cannot start workers", 60)
        rc = job.finish(120)
    finally:
        job.stop()
    out = job.output()
    print(line)
    assert rc == 0, out[-4000:]
    assert "blacklisted" in line and "Could not resolve hostname nohost.invalid" in line, line
    summary = read_json(job.results / "summary.json")
    assert summary["final_epoch"] == epochs and summary["size"] == 1 and summary["resets"] == 0, summary
