"""Asynchronous checkpoint writes: at most one durable write in flight, errors never lost.

Training hands over a snapshot that is already a copy in host memory (``FrameworkOps.capture``
promises that), so the training thread only pays for that copy; serialising, checksumming, fsync and
the atomic renames of :class:`~hvdkit.core.checkpoint_store.CheckpointStore` run on a background thread
meanwhile. The store's guarantees are unchanged: a crash (even SIGKILL) during a background write
leaves an invisible temporary file and every earlier checkpoint loadable.

Only one write is in flight: a second :meth:`BackgroundSave.submit` first waits for the one before (so
memory holds at most two snapshots, the one being written and the one just taken). An exception of a
background write is raised, naming the file, by the next :meth:`submit` or :meth:`wait`, which the
checkpoint callback calls at the end of training: a failed save is never silently dropped.
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
