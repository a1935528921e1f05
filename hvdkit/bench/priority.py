"""Shield the benchmark's jobs from other work on the machine: run them at a raised CPU priority.

Interleaving the compared implementations in rounds (``hvdkit.bench.rounds``) cancels noise that comes
and goes. A *sustained* load is different: a process that keeps a core busy beside a 2-process job
takes that core's share for the whole run, and what is then measured is how each implementation copes
with too few cores (Open MPI's shared-memory polling against gloo's blocking waits, docs/benchmarks.md),
not what it costs on the cores a training job is given. So the driver raises its own priority and that
of every job it starts, and records whether it could (``results.json``, ``report.md``):

- Linux's scheduler shares a busy core by weight: nice -10 weighs 9548 against nice 0's 1024, so a
  nice-0 process beside the job keeps about a tenth of the core and runs when the job waits.
- With autogroup (``/proc/sys/kernel/sched_autogroup_enabled``, on by default on Debian and Ubuntu)
  those weights act between sessions, and every job runs in a session of its own (it is killed as a
  group, and ``torchrun`` starts each rank in a session of its own): every rank gives its session the
  nice value through ``/proc/self/autogroup`` (``apply_session_nice``, called when a worker starts).

Lowering a nice value needs ``CAP_SYS_NICE`` (root, or ``setcap``). Without it the run goes on at
normal priority and says so. ``hvdkit bench --nice 0`` measures at normal priority on purpose, e.g. to
see how the implementations share an oversubscribed machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The nice value ``hvdkit bench`` asks for by default.
DEFAULT_NICE = -10

#: The environment variable that carries the nice value from the driver to the ranks.
NICE_VAR = "HVDKIT_BENCH_NICE"

AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")

_job_nice: int | None = None


def check_nice(value: int) -> int:
    """``value`` if it is a valid nice value (-20 to 19), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not -20 <= value <= 19:
        raise ValueError(f"--nice must be an integer from -20 to 19, got {value!r}")
    return value


def _autogroup() -> bool:
    try:
        return AUTOGROUP_SWITCH.read_text().strip() == "1"
    except OSError:
        return False


def raise_priority(nice: int = DEFAULT_NICE) -> dict[str, Any]:
    """Set this process's nice value to ``nice`` and have every job started after it use the same.

    Returns what was done, for the report: ``{"nice": requested, "raised": bool, "autogroup": bool,
    "why": reason when not raised}``. ``nice`` 0 (or more) leaves the priority alone."""
    global _job_nice
    check_nice(nice)
    state: dict[str, Any] = {"nice": nice, "raised": False, "autogroup": _autogroup()}
    if nice >= 0:
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
    """What a job's environment needs for its ranks to take the raised priority (empty at normal priority)."""
    return {} if _job_nice is None else {NICE_VAR: str(_job_nice)}


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
        nice = check_nice(int(value))
    except ValueError:
        raise ValueError(f"{NICE_VAR} must be an integer from -20 to 19, got {value!r}") from None
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:  # no autogroup in this kernel: the per-process nice value inherited from the driver applies
        return False
    return True


def current_priority() -> dict[str, int | None]:
    """This process's nice value and its session's (autogroup) nice value, None without autogroup."""
    session: int | None = None
    try:
        session = int(Path("/proc/self/autogroup").read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        pass
    return {"nice": os.getpriority(os.PRIO_PROCESS, 0), "session_nice": session}
