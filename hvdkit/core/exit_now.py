"""Ending this process at once from a watchdog thread, without leaving its child processes behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import NoReturn


def child_pids(pid: int | None = None) -> list[int]:
    """The processes whose parent is ``pid`` (default: this process), read from ``/proc``."""
    pid = os.getpid() if pid is None else pid
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def exit_now(code: int) -> NoReturn:
    """SIGKILL to this process's children, then ``os._exit(code)``. The training thread may be stuck, so there is
    no clean interpreter exit; and ``os._exit`` skips multiprocessing's atexit hook, which ends a DataLoader's
    workers: one stuck on a read would outlive the job, holding its memory and files."""
    for child in child_pids():
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    os._exit(code)
