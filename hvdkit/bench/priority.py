"""Shield the benchmark's jobs from other work on the machine: run them at a raised CPU priority.

Interleaving the compared implementations in rounds (``hvdkit.bench.rounds``) cancels noise that comes
and goes. A *sustained* load is different: a process that keeps a core busy beside a 2-process job
takes that core's share for the whole run, and what is then measured is how each implementation copes
with too few cores (Open MPI's shared-memory polling against gloo's blocking waits, docs/benchmarks.md),
not what it costs on the cores a training job is given. So the driver raises its own priority and that
of every job it starts, and records whether it could (``results.json``, ``report.md``):

- Linux's scheduler shares a busy core by weight: nice -20 weighs 88761 against nice 0's 1024, so a
  nice-0 process beside the job keeps about a hundredth of the core and runs when the job waits. At
  nice -10 (weight 9548, hvdkit's default before 2026-11-27) it kept about a tenth, and since a
  2-process job runs in lockstep, the rank that shares its core with it sets the pace of both: beside
  one CPU burner the 2-process job with no communication ran at 0.874 of twice the 1-process job at
  nice -10, against 1.028 at nice -20, alternating in the same run (docs/benchmarks.md, "Priority").
- With autogroup (``/proc/sys/kernel/sched_autogroup_enabled``, on by default on Debian and Ubuntu)
  those weights act between sessions, and every job runs in a session of its own (it is killed as a
  group, and ``torchrun`` starts each rank in a session of its own): every rank gives its session the
  nice value through ``/proc/self/autogroup`` (``apply_session_nice``, called when a worker starts).

Lowering a nice value needs ``CAP_SYS_NICE`` (root, or ``setcap``). Without it the run goes on at
normal priority and says so; a rank whose session could not take the value says so on its stderr, and the
report counts the jobs whose sessions ran at it. ``hvdkit bench --nice 0`` measures at normal priority on
purpose, e.g. to see how the implementations share an oversubscribed machine.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The nice value ``hvdkit bench`` asks for by default.
DEFAULT_NICE = -20

#: The environment variables that carry the driver's nice value and its own session id to the ranks.
NICE_VAR = "HVDKIT_BENCH_NICE"
SID_VAR = "HVDKIT_BENCH_SID"

AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")
SESSION_FILE = Path("/proc/self/autogroup")

#: Without CAP_SYS_ADMIN the kernel takes one change of a session's nice value per 100 ms and answers
#: EAGAIN to the others (two torchrun ranks starting together): so many tries, 0.1 s apart.
SESSION_TRIES = 10

_job_nice: int | None = None


def check_nice(value: int, name: str = "--nice") -> int:
    """``value`` if it is a nice value the bench can run at (-20 to 0: 0 is normal priority, lower is
    higher priority), else a ValueError naming ``name``, the value and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not -20 <= value <= 0:
        raise ValueError(f"{name} must be an integer from -20 (highest priority) to 0 (normal), got {value!r}")
    return value


def _autogroup() -> bool:
    try:
        return AUTOGROUP_SWITCH.read_text().strip() == "1"
    except OSError:
        return False


def raise_priority(nice: int = DEFAULT_NICE) -> dict[str, Any]:
    """Set this process's nice value to ``nice`` and have every job started after it use the same.

    Returns what was done, for the report: ``{"nice": requested, "raised": bool, "autogroup": bool,
    "why": reason when not raised}``. ``nice`` 0 leaves the priority alone."""
    global _job_nice
    check_nice(nice)
    state: dict[str, Any] = {"nice": nice, "raised": False, "autogroup": _autogroup()}
    if nice == 0:
        _job_nice = None
        state["why"] = f"not asked for (--nice {nice})"
        return state
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError as exc:
        _job_nice = None
        state["why"] = f"no permission to lower the nice value (needs CAP_SYS_NICE): {exc}"
        return state
    _job_nice = nice
    state["raised"] = True
    return state


def job_env() -> dict[str, str]:
    """What a job's environment needs for its ranks to take the raised priority (empty at normal priority):
    the nice value, and this process's session, which the ranks must leave alone (it is the caller's)."""
    return {} if _job_nice is None else {NICE_VAR: str(_job_nice), SID_VAR: str(os.getsid(0))}


def _write_session_nice(nice: int) -> None:
    with open(SESSION_FILE, "w") as f:
        f.write(str(nice))


def apply_session_nice(environ: Mapping[str, str] | None = None) -> bool:
    """In a benchmark rank: give this process's session the nice value ``HVDKIT_BENCH_NICE`` names.

    Every rank calls it (``hvdkit.bench.workers``), because launchers differ: ``horovodrun`` and
    ``mpirun`` keep their ranks in the job's session, ``torchrun`` starts each rank in a session of its
    own, and with autogroup a new session starts at nice 0 whatever its processes' nice values are.
    Returns whether the session's nice value was set."""
    env = os.environ if environ is None else environ
    value = env.get(NICE_VAR)
    if not value:
        return False
    try:
        nice = check_nice(int(value), NICE_VAR)
    except ValueError:
        raise ValueError(f"{NICE_VAR} must be an integer from -20 (highest priority) to 0 (normal), "
                         f"got {value!r}") from None
    if env.get(SID_VAR) == str(os.getsid(0)):
        return False  # still in the driver's session, i.e. the caller's (a job started without a session)
    for attempt in range(SESSION_TRIES):
        try:
            _write_session_nice(nice)
            return True
        except OSError as exc:
            if exc.errno == errno.EAGAIN and attempt + 1 < SESSION_TRIES:
                time.sleep(0.1)  # the kernel's rate limit on changing a session's nice value (see SESSION_TRIES)
                continue
            if exc.errno == errno.ENOENT:  # no autogroup in this kernel: the inherited process nice value applies
                return False
            print(f"hvdkit bench: this rank's session keeps its priority: setting its nice value to {nice} in "
                  f"{SESSION_FILE} failed: {exc}", file=sys.stderr, flush=True)
            return False
    return False


def current_priority() -> dict[str, int | None]:
    """This process's nice value and its session's (autogroup) nice value, None where autogroup is off or
    not in the kernel."""
    session: int | None = None
    if not _autogroup():
        return {"nice": os.getpriority(os.PRIO_PROCESS, 0), "session_nice": None}
    try:
        session = int(SESSION_FILE.read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        pass
    return {"nice": os.getpriority(os.PRIO_PROCESS, 0), "session_nice": session}
