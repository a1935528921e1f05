"""A rank that waits in Horovod's init for ranks that never come ends the job after HVDKIT_START_TIMEOUT seconds,
saying so and where init was called. Under MPI nothing else ends it: MPI_Init waits for every rank for ever."""

import re
import threading
import time

import pytest
from helpers import WORKERS, have_horovod, horovodrun

from hvdkit.core import hang_report, start_watch
from hvdkit.runtime.env_vars import check_env

TIMEOUT = 5


def init_line() -> int:
    lines = (WORKERS / "late_start.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "CALLS INIT" in line)


@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(not have_horovod(), reason="needs Horovod's torch build")
@pytest.mark.parametrize("launcher, who", [((), "MPI rank 0 started by mpirun"),
                                           (("--gloo",), "Horovod launcher (Gloo): rank 0 of 2 on ")],
                         ids=["mpi", "gloo"])
def test_a_rank_that_never_reaches_init_ends_the_job_with_a_message_from_the_ranks_that_did(launcher, who):
    start = time.monotonic()
    proc = horovodrun("late_start.py", extra=launcher, timeout=150, check=False,
                      env={"HVDKIT_START_TIMEOUT": str(TIMEOUT)})
    wall = time.monotonic() - start
    err = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "not reached" not in err, err[-4000:]
    said = [line for line in err.splitlines()
            if f"in Horovod's init for the other ranks (HVDKIT_START_TIMEOUT={TIMEOUT})" in line]
    assert len(said) == 1, err[-4000:]  # rank 0 only: rank 1 never got there
    assert re.match(rf"\[(1,)?0\]<stderr>:hvdkit: this process \({re.escape(who)}", said[0]), said
    assert f"init was called at {WORKERS / 'late_start.py'}:{init_line()} in <module>" in err, err[-4000:]
    assert "--- stacks ---" in err
    # one torch import, the timeout, the launcher's ending of rank 1: far from for ever (or Gloo's 30 s abort)
    assert wall < TIMEOUT + 45, wall


def test_the_watch_ends_the_process_with_a_message_when_init_does_not_return(capsys):
    exited: list[int] = []
    fired = threading.Event()

    def fake_exit(code: int) -> None:
        exited.append(code)
        fired.set()

    start_watch.StartWatch("rank 3 of 4", timeout=0.2, exit=fake_exit)
    assert fired.wait(30)  # this thread stands for one blocked in init
    assert exited == [hang_report.EXIT_CODE]
    err = capsys.readouterr().err
    assert "hvdkit: this process (rank 3 of 4; host " in err
    assert "has waited 0.2 s in Horovod's init for the other ranks (HVDKIT_START_TIMEOUT=0.2)" in err
    assert "init was called at " + __file__ in err and "in test_the_watch_ends_the_process" in err


def test_an_init_that_returns_in_time_stops_the_watch():
    exited: list[int] = []
    watch = start_watch.StartWatch("rank 0 of 2", timeout=0.2, exit=exited.append)
    watch.done()  # joins the thread: a watch that went on would exit after 0.2 s
    assert not watch._thread.is_alive() and exited == []
    off = start_watch.StartWatch("rank 0 of 2", timeout=0, exit=exited.append)
    assert not off._thread.is_alive() and off.timeout == 0


def test_a_bad_start_timeout_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=r"HVDKIT_START_TIMEOUT must be a number of seconds >= 0.*got 'soon'"):
        check_env({"HVDKIT_START_TIMEOUT": "soon"})
    assert hang_report.read_timeout({"HVDKIT_START_TIMEOUT": "0"}, start_watch.START_ENV) == 0
    assert hang_report.read_timeout({}, start_watch.START_ENV, start_watch.DEFAULT_START_TIMEOUT) == 600
