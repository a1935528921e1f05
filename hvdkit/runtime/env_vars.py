"""The HOROVOD_* and HVDKIT_* variables hvdkit sets or reads, and what each may hold.

Horovod parses its variables with C's ``strtol``/``strtod`` and takes whatever comes out: ``abc`` reads
as 0 and a negative cycle time makes the background thread spin on a core. ``init()`` and
``hvdkit doctor`` check them here first, from this one table.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Callable, Mapping
from typing import Any


def _parses(parse: Callable[[str], Any], test: Callable[[Any], bool] = lambda _: True) -> Callable[[str], bool]:
    def ok(text: str) -> bool:
        try:
            return test(parse(text.strip()))
        except ValueError:
            return False
    return ok


def _integer(minimum: int, maximum: int | None = None) -> Callable[[str], bool]:
    return _parses(int, lambda v: v >= minimum and (maximum is None or v <= maximum))


def _number(minimum: float, strict: bool) -> Callable[[str], bool]:
    return _parses(float, lambda v: math.isfinite(v) and (v > minimum if strict else v >= minimum))


def _choice(*choices: str) -> Callable[[str], bool]:
    return lambda text: text.strip().lower() in choices


# name -> (check, what is allowed, an example value)
ENV_VARS: dict[str, tuple[Callable[[str], bool], str, str]] = {
    "HOROVOD_CYCLE_TIME": (_number(0, strict=True), "a number of milliseconds > 0", "0.1"),
    "HOROVOD_FUSION_THRESHOLD": (_integer(0), "an integer number of bytes >= 0", str(1 << 20)),
    "HOROVOD_STALL_CHECK_TIME_SECONDS": (_integer(0), "an integer number of seconds >= 0", "60"),
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": (_integer(0), "an integer number of seconds >= 0", "600"),
    "HOROVOD_RANK": (_integer(0), "an integer >= 0", "0"),
    "HOROVOD_SIZE": (_integer(1), "an integer >= 1", "2"),
    "HOROVOD_LOCAL_RANK": (_integer(0), "an integer >= 0", "0"),
    "HOROVOD_LOCAL_SIZE": (_integer(1), "an integer >= 1", "2"),
    "HOROVOD_CROSS_RANK": (_integer(0), "an integer >= 0", "0"),
    "HOROVOD_CROSS_SIZE": (_integer(1), "an integer >= 1", "1"),
    "HOROVOD_CONTROLLER": (_choice("mpi", "gloo"), "mpi or gloo", "gloo"),
    "HOROVOD_CPU_OPERATIONS": (_choice("mpi", "gloo", "ccl"), "mpi, gloo or ccl", "gloo"),
    "HOROVOD_ELASTIC": (_choice("0", "1"), "0 or 1", "1"),
    "HOROVOD_GLOO_RENDEZVOUS_PORT": (_integer(1, 65535), "a TCP port, 1 to 65535", "29500"),
    "HVDKIT_THREADS": (_integer(1), "an integer >= 1", "4"),
    "HVDKIT_NO_TUNING": (_choice("0", "1"), "0 or 1", "1"),
    "HVDKIT_CHECKPOINT_WAIT": (_number(0, strict=False), "a number of seconds >= 0", "600"),
    "HVDKIT_STOP_GRACE": (_number(0, strict=False), "a number of seconds >= 0", "30"),
    "HVDKIT_HANG_TIMEOUT": (_number(0, strict=False), "a number of seconds >= 0 (0: no hang report)", "300"),
    "HVDKIT_START_TIMEOUT": (_number(0, strict=False), "a number of seconds >= 0 (0: wait in init for ever)",
                             "600"),
    "HVDKIT_SRUN_ARGS": (_parses(shlex.split), "srun options as a shell would split them (balanced quotes)",
                         "--exclusive"),
}


#: hvdkit's variables read elsewhere (``./run.sh``, ``hvdkit build-horovod``): no misspelling of another
OTHER_HVDKIT_VARS = ("HVDKIT_HOME", "HVDKIT_CACHE_DIR", "HVDKIT_PYTHON", "HVDKIT_TORCH_INDEX")


def misspelt(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, meant)`` for each ``HVDKIT_*`` variable set that hvdkit does not read but nearly spells one it
    does (``HVDKIT_HANG_TIMOUT``): silently ignored, it would leave the default in force."""
    env = os.environ if environ is None else environ
    known = [n for n in ENV_VARS if n.startswith("HVDKIT_")] + list(OTHER_HVDKIT_VARS)
    found = []
    for name in sorted(n for n in env if n.startswith("HVDKIT_") and n not in known):
        meant = next((k for k in known if _one_slip(name, k)), None)
        if meant:
            found.append((name, meant))
    return found


def _one_slip(typed: str, name: str) -> bool:
    """``typed`` is ``name`` with one letter left out, replaced, or swapped with its neighbour. A longer name
    (``HVDKIT_PYTHON3``, ``HVDKIT_HOMES``) is someone's own variable, not a slip."""
    if len(typed) == len(name) - 1:
        return any(name[:i] + name[i + 1:] == typed for i in range(len(name)))
    if len(typed) != len(name):
        return False
    diff = [i for i, (a, b) in enumerate(zip(typed, name)) if a != b]
    return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and typed[diff[0]] == name[diff[1]]
                              and typed[diff[1]] == name[diff[0]])


#: (rank variable, size variable): a rank is below its size
RANK_PAIRS = (("HOROVOD_RANK", "HOROVOD_SIZE"), ("HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
              ("HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE"))


def env_problems(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(problem, fix)`` for every variable of :data:`ENV_VARS` set to a value it may not hold, every rank of
    :data:`RANK_PAIRS` not below its size, and every :func:`misspelt` name."""
    env = os.environ if environ is None else environ
    found, bad = [], set()
    for name, (ok, allowed, example) in ENV_VARS.items():
        value = env.get(name)
        if value is not None and not ok(value):
            found.append((f"{name} must be {allowed}, got {value!r}", f"export {name}={example}, or unset {name}"))
            bad.add(name)
    for rank, size in RANK_PAIRS:
        if rank in env and size in env and not bad & {rank, size} and int(env[rank]) >= int(env[size]):
            found.append((f"{rank} must be below {size}={env[size].strip()}, got {env[rank]!r}",
                          f"let the launcher set both (horovodrun -np N), or unset {rank} and {size}"))
    for name, meant in misspelt(env):
        found.append((f"{name} is set, but hvdkit reads no such variable: {meant} is meant, and its default is in "
                      "force", f"export {meant}={env[name]!r} and unset {name}"))
    return found


def check_env(environ: Mapping[str, str] | None = None) -> None:
    """Before ``hvd.init()``: a ValueError naming every bad variable, its value and what is allowed."""
    problems = env_problems(environ)
    if problems:
        raise ValueError("bad environment variable(s): " + "; ".join(f"{p} ({fix})" for p, fix in problems))
