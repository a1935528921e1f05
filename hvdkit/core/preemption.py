"""Stop signals: SIGTERM and SIGUSR1, what Slurm (``--signal=USR1@60``), Kubernetes and hvdkit's
``horovodrun`` send before a job is killed.

:class:`StopSignals` only records the first one; the training loop stops at a step's end, where
every rank agrees (the signal reaches ranks at different steps, and a rank that left early would
leave the others waiting in a collective). A second signal ends the process at once, and so does
the grace period running out (``HVDKIT_STOP_GRACE`` seconds, default 30): a stop request cannot
hang, e.g. behind a rank that died inside a collective.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

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


class StopSignals:
    """While installed, SIGTERM/SIGUSR1 set :attr:`received` instead of ending the process."""

    def __init__(self, grace: float | None = None, exit_fn: Callable[[int], Any] = os._exit) -> None:
        self.grace = stop_grace() if grace is None else grace
        self.received: int | None = None
        self._exit = exit_fn
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None

    def install(self) -> bool:
        """Install the handlers; False (and nothing installed) off the main thread, where Python
        cannot set handlers (e.g. a training loop run in a thread)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return True

    def uninstall(self) -> None:
        """Put the previous handlers back. A grace timer already started keeps running: the process is
        on its way out, and the bound holds until it is gone."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is not None:  # asked twice: stop now
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.received = signum
        self._timer = threading.Timer(self.grace, self._give_up)
        self._timer.daemon = True
        self._timer.start()

    def _give_up(self) -> None:
        assert self.received is not None
        log.error("%s: training did not stop within HVDKIT_STOP_GRACE=%gs; exiting without a new checkpoint",
                  signal.Signals(self.received).name, self.grace)
        self._exit(128 + self.received)
