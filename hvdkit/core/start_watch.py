"""The start watch: a process that has waited in Horovod's ``init`` for ``HVDKIT_START_TIMEOUT`` seconds says so
and exits, as the hang report does once training has begun."""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable

from hvdkit.core.exit_now import exit_now
from hvdkit.core.hang_report import EXIT_CODE, read_timeout
from hvdkit.core.stack_inspection import all_stacks, user_line

#: Start-up varies more than a step does (imports, a node that boots or pulls an image later): its own limit.
START_ENV = "HVDKIT_START_TIMEOUT"
DEFAULT_START_TIMEOUT = 600.0


class StartWatch:
    """While Horovod's ``init`` runs: if it has not returned after ``HVDKIT_START_TIMEOUT`` seconds, this process
    says so, with where it was called and every thread's stack, and exits with :data:`EXIT_CODE`. Under MPI
    nothing else would end it: ``MPI_Init`` waits for every rank for ever (Gloo's rendezvous gives up after
    ``HOROVOD_GLOO_TIMEOUT_SECONDS``, 30 by default). No collective works yet, so each waiting rank reports
    alone; the launcher prefixes its lines with its rank, and a rank that never printed is the one to read."""

    def __init__(self, who: str, timeout: float | None = None, exit: Callable[[int], None] = exit_now) -> None:
        self.who, self._exit = who, exit
        self.timeout = read_timeout(name=START_ENV, default=DEFAULT_START_TIMEOUT) if timeout is None else timeout
        self._caller = threading.get_ident()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hvdkit-start-watchdog", daemon=True)
        if self.timeout > 0:
            self._thread.start()

    def done(self) -> None:
        """``init`` returned (or raised): stop watching."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        if self._done.wait(self.timeout):
            return
        frame = sys._current_frames().get(self._caller)
        sys.stderr.write(
            f"hvdkit: this process ({self.who}; host {socket.gethostname()}, pid {os.getpid()}) has waited "
            f"{self.timeout:g} s in Horovod's init for the other ranks ({START_ENV}={self.timeout:g}): the job "
            f"cannot start and ends now (exit status {EXIT_CODE}).\n"
            "  Every rank that reached init prints this line. A rank that did not is still starting, stuck before "
            "init or gone: read its own output.\n"
            f"  init was called at {user_line(frame)}\n--- stacks ---\n{all_stacks().rstrip()}\n")
        sys.stderr.flush()
        self._exit(EXIT_CODE)
