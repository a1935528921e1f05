"""Asynchronous checkpoint writes: at most one in flight, errors never lost.

The snapshot is already a host copy (``FrameworkOps.capture``), so serialising, checksumming and the
atomic renames run on a background thread with the store's crash guarantees unchanged. A second
:meth:`BackgroundSave.submit` waits for the first, so memory holds at most two snapshots; a failed
write is raised, naming the file, by the next :meth:`~BackgroundSave.submit` or :meth:`~BackgroundSave.wait`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class BackgroundSave:
    """Runs one write at a time on a non-daemon thread (the interpreter waits for it at exit)."""

    def __init__(self, name: str = "hvdkit-checkpoint-write") -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._result: object = None
        self.last_write_seconds: float | None = None  # duration of the last finished write

    @property
    def in_flight(self) -> bool:
        """True while a write runs."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, write: Callable[[], T], done: Callable[[T], None] | None = None) -> None:
        """Wait for the previous write (raising its error), then start ``write()`` in the background;
        ``done(result)`` runs on the writer thread after it succeeds."""
        self.wait()

        def run() -> None:
            t0 = time.perf_counter()
            try:
                result = write()
                if done is not None:
                    done(result)
                self._result = result
            except BaseException as exc:  # handed to the training thread by wait()
                self._error = exc
            finally:
                self.last_write_seconds = time.perf_counter() - t0

        self._thread = threading.Thread(target=run, name=self.name)
        self._thread.start()

    def wait(self) -> object:
        """Block until no write is in flight; raise the exception of a write that failed (once); return
        the last write's result."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc
        return self._result
