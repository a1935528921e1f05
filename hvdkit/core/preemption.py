"""Stop signals: SIGTERM and SIGUSR1, what Slurm (``--signal=USR1@60``), Kubernetes and hvdkit's
``horovodrun`` send before a job is killed.

:class:`StopSignals` only records the first one; the training loop stops at a step's end, where
every rank agrees (the signal reaches ranks at different steps, and a rank that left early would
leave the others waiting in a collective). A second signal ends the process at once, and so does
the grace period running out (``HVDKIT_STOP_GRACE`` seconds, default 30): a stop request cannot
hang, e.g. behind a rank that died inside a collective.

The signals are read on a thread of their own, through :func:`signal.set_wakeup_fd`: Python runs
signal handlers on the main thread only, between bytecodes, and a main thread blocked in a
collective (Horovod waits in C++ with the GIL released) would run them only once the collective
returns, which a second signal or the grace period must not wait for.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from hvdkit.core.exit_now import exit_now
from hvdkit.core.hang_report import this_process

log = logging.getLogger("hvdkit")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
DEFAULT_GRACE_S = 30.0


def stop_grace(environ: dict[str, str] | None = None) -> float:
    """``HVDKIT_STOP_GRACE`` as seconds (default 30), checked."""
    value = (os.environ if environ is None else environ).get("HVDKIT_STOP_GRACE", str(DEFAULT_GRACE_S))
    try:
        grace = float(value)
    except ValueError:
        grace = -1.0
    if not grace >= 0:
        raise ValueError(f"HVDKIT_STOP_GRACE must be a number of seconds >= 0, got {value!r}")
    return grace


def _noop(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler: the wakeup fd does the work (a handler must be set for it to be written)."""


_installed: list[StopSignals] = []  # the instance installed now, if any


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) gets the previous handlers back: its signals are not this
    process's, and its wakeup byte would land in this process's pipe."""
    for stop in _installed:
        stop.uninstall()


os.register_at_fork(after_in_child=_after_fork_in_child)


class StopSignals:
    """While installed, SIGTERM/SIGUSR1 set :attr:`received` instead of ending the process.

    :attr:`outcome` is what the exit messages of a second signal or the grace period say about the
    checkpoint (the stop's owner keeps it up to date: written, being written, or none)."""

    def __init__(self, grace: float | None = None, exit_fn: Callable[[int], Any] = exit_now) -> None:
        self.grace = stop_grace() if grace is None else grace
        self.received: int | None = None
        self.outcome = "without a new checkpoint"
        self._exit = exit_fn
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        self._write_fd = -1
        self._old_wakeup_fd = -1

    def install(self) -> bool:
        """Install the handlers; False (and nothing installed) off the main thread, where Python
        cannot set handlers (e.g. a training loop run in a thread)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)  # the C-level handler must never block
        self._old_wakeup_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(read_fd, self._old_wakeup_fd), name="hvdkit-stop-signals",
                         daemon=True).start()
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, _noop)
        _installed.append(self)
        return True

    def uninstall(self) -> None:
        """Put the previous handlers back. A grace timer already started keeps running: the process is
        on its way out, and the bound holds until it is gone."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._write_fd >= 0:
            signal.set_wakeup_fd(self._old_wakeup_fd)
            os.close(self._write_fd)  # the watcher reads end-of-file and ends
            self._write_fd = -1
        if self in _installed:
            _installed.remove(self)

    def agreed(self, comm: Any) -> int | None:
        """The stop signal any rank of ``comm`` received, or None: the same answer on every rank. Every rank
        runs the same one small allreduce each call, signal or not: a rank that skipped it would wait in
        another collective than its peers."""
        received = self.received  # read once: the decision below is from what every rank sent
        if comm.size == 1:
            return received
        votes = comm.allreduce_mean({"stop": float(received is not None), "usr1": float(received == signal.SIGUSR1)})
        if votes["stop"] == 0:
            return None
        if received is None:  # a peer's signal: name it when they all got the same one
            received = signal.SIGUSR1 if votes["usr1"] == votes["stop"] else signal.SIGTERM
        return received

    def _watch(self, read_fd: int, forward_fd: int) -> None:
        """Each byte is a signal's number, written by Python's C-level handler the moment it arrives."""
        try:
            while data := os.read(read_fd, 64):
                if forward_fd >= 0:  # whoever had the wakeup fd before still hears of every signal
                    try:
                        os.write(forward_fd, data)
                    except OSError:
                        pass
                for signum in data:
                    if signum in STOP_SIGNALS:
                        self._handle(signum)
        finally:
            os.close(read_fd)

    def _handle(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:  # asked twice: stop now
            log.error("%s again: exiting now, %s", name, self.outcome)
            self._exit(128 + signum)
            return
        self.received = signum
        self._timer = threading.Timer(self.grace, self._give_up)
        self._timer.daemon = True
        self._timer.start()

    def _give_up(self) -> None:
        assert self.received is not None
        report = this_process()  # where this process is stuck: the operator's question
        log.error("%s: training did not stop within HVDKIT_STOP_GRACE=%gs; exiting %s. This process %s. A rank "
                  "not in a collective is the one that held the others up\n%s", signal.Signals(self.received).name,
                  self.grace, self.outcome, report.status(), report.stacks)
        self._exit(128 + self.received)
