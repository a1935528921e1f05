"""Elastic training glue between the Engine and Horovod's elastic state (framework-free).

Horovod's elastic ``State`` (``common/elastic.py``) commits, restores and syncs model and
optimizer; what it leaves to the user is everything else a training run is made of. An
:class:`ElasticProgress` supplies that: the engine's counters (epoch, batch in epoch, global
step, target LR and the world size it is scaled for, history) and every callback's state go
into each commit; after a rollback or sync they are put back; after a reset the LR follows the
linear scaling rule for the new world size and callbacks get ``on_reset``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.validation import check_int

log = logging.getLogger("hvdkit")


class ElasticProgress:
    def __init__(self, engine: Engine, commit_every: int = 10) -> None:
        self.engine = engine
        self.commit_every = check_int("commit_every", commit_every, minimum=1)
        self.resets = 0
        self.failed_at: float | None = None  # when the last failure or host change was noticed
        self.recovery_seconds: list[float] = []

    def snapshot(self) -> dict[str, Any]:
        s = self.engine.state
        self._last = {"counters": s.counters(), "callbacks": self.engine.dispatcher.state_dict(),
                      "lr": s.ops.get_lr()}
        return self._last

    def apply(self, snap: dict[str, Any] | None = None) -> None:
        """Put committed (or rank 0's, after a sync) counters, callback states and LR back.

        Everything is derived from the snapshot and the current world size, never from the
        current LR, so applying twice (restore, then reset, then sync) gives the same result.
        """
        snap = snap or getattr(self, "_last", None)
        if not snap:
            return
        s = self.engine.state
        s.load_counters(snap["counters"])
        self.engine.dispatcher.load_state_dict(snap.get("callbacks", {}))
        size, old = s.comm.size, s.target_world_size
        ratio = size / old
        if s.target_lr is not None:
            s.target_lr *= ratio
        s.target_world_size = size
        s.ops.set_lr(snap["lr"] * ratio)
        s.last_applied_lr = None
        self._last = snap

    def should_commit(self) -> bool:
        return self.engine.state.global_step % self.commit_every == 0

    def on_reset(self) -> None:
        """After Horovod re-initialised with a new set of workers."""
        self.resets += 1
        if self.failed_at is None:  # a host change (no rollback): noticed at this reset
            self.failed_at = time.monotonic()
        s = self.engine.state
        old = s.target_world_size
        self.apply()  # the last commit (already restored after a failure), rescaled to the new size
        if s.is_root:
            if old != s.comm.size:
                log.warning("world size changed from %d to %d: learning rate rescaled by %g (linear scaling rule)",
                            old, s.comm.size, s.comm.size / old)
            log.warning("elastic reset #%d: %d worker(s) now; resuming from epoch %d, batch %d (step %d)",
                        self.resets, s.comm.size, s.epoch, s.batch, s.global_step)
        self.engine.fire(Event.RESET)

    def failure_noticed(self) -> None:
        """Called when a collective failed and the state rolls back to the last commit."""
        self.failed_at = time.monotonic()

    def step_done(self) -> None:
        """Record the time from the failure (or host change) to the first completed step after it."""
        if self.failed_at is not None and self.resets:
            self.recovery_seconds.append(time.monotonic() - self.failed_at)
            self.failed_at = None
