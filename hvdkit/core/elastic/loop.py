"""The elastic training loop: one implementation of commit, rollback and reset for every framework.

Horovod's elastic mode commits a ``State`` in memory, rolls back to it after a failure and syncs it
from rank 0 after a reset; :class:`ElasticLoop` adds the training run around it: the data position
(:class:`~hvdkit.core.elastic.sampler.ElasticIndexSampler`), a snapshot of counters, callback states
and LR in every commit (:class:`~hvdkit.core.elastic.state.LoopCommit`), and the LR rescaled for the
new world size after a reset. An adapter supplies an :class:`ElasticAdapter`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from hvdkit.core.elastic.sampler import ElasticIndexSampler
from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.history import History
from hvdkit.core.types import Logs, Snapshot
from hvdkit.core.validation import check_int

log = logging.getLogger("hvdkit")


class CommitState(Protocol):
    """The part of Horovod's elastic ``State`` the loop uses."""

    def commit(self) -> None:
        """Save the state in memory; Horovod may raise ``HostsUpdatedInterrupt`` after saving."""
    def register_reset_callbacks(self, callbacks: list[Callable[[], None]]) -> None:
        """Functions Horovod calls after each reset."""


class ElasticAdapter(Protocol):
    """What a framework adapter gives the loop.

    ``batch_end_in_step``: False when ``step_end`` may run later on another thread (Keras), so it must
    not move the counters (see :meth:`Engine.batch_end <hvdkit.core.engine.Engine.batch_end>`).
    """

    batch_end_in_step: bool

    def make_state(self, loop: ElasticLoop) -> CommitState:
        """Horovod elastic ``State`` of model, optimizer and the loop's snapshot (mixes in ``LoopCommit``)."""

    def run(self, func: Callable[[Any], None]) -> Callable[[Any], None]:
        """Horovod's elastic retry decorator for this framework (``hvd.elastic.run``)."""

    def train_steps(self, loop: ElasticLoop, indices: Sequence[int]) -> Mapping[str, float]:
        """Train ``indices`` in batches, calling ``loop.step_begin(i)``/``loop.step_end(i, logs)`` around
        step ``i`` (0-based in this call); return the steps' mean loss and metrics."""


class ElasticLoop:
    """Run ``epochs`` epochs over ``num_samples`` samples under Horovod's elastic driver.

    ``resets`` counts elastic resets; ``recovery_seconds`` holds, per reset, the time from noticing the
    failure (or host change) to the first step done after it.
    """

    def __init__(self, engine: Engine, num_samples: int, *, epochs: int, batch_size: int, commit_every: int = 10,
                 shuffle: bool = True, seed: int = 0) -> None:
        self.epochs = check_int("epochs", epochs, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.commit_every = check_int("commit_every", commit_every, minimum=1)
        if not engine.state.elastic:
            raise RuntimeError(
                "fit_elastic needs Horovod's elastic driver: run it with horovodrun --min-np N --max-np M "
                "--host-discovery-script SCRIPT (hvdkit elastic-local on one machine); for a fixed set of "
                "workers use fit")
        self.engine = engine
        self.sampler = ElasticIndexSampler(num_samples, shuffle=shuffle, seed=seed)
        self.resets = 0
        self.recovery_seconds: list[float] = []
        self._failed_at: float | None = None
        self._state: CommitState | None = None
        self._last: Snapshot | None = None
        self._offset = self._base = self._steps = 0
        self._advance = True

    def steps_per_epoch(self) -> int:
        """Batches per epoch on each worker for the current world size."""
        return math.ceil(self.sampler.num_samples / (self.batch_size * self.engine.state.comm.size))

    def run(self, adapter: ElasticAdapter) -> History:
        """Train to the last epoch through every reset; return the run's history."""
        engine, s = self.engine, self.engine.state
        engine.elastic, engine.driver = self, self
        start = s.epoch
        try:
            engine.train_begin(self.epochs, steps_per_epoch=self.steps_per_epoch())  # rank 0 may resume here
            start = s.epoch
            self.sampler.set_epoch(s.epoch)
            self._state = adapter.make_state(self)
            self._state.register_reset_callbacks([self.on_reset])
            self._advance = adapter.batch_end_in_step
            adapter.run(lambda state: self._train(adapter, state))(self._state)
        finally:
            try:
                engine.train_end()
            finally:
                engine.elastic = engine.driver = None
        return History(history={k: list(v) for k, v in s.history.items()}, epoch=list(range(start, s.epoch)),
                       elastic=self)

    def _train(self, adapter: ElasticAdapter, state: CommitState) -> None:
        engine, s = self.engine, self.engine.state
        while s.epoch < self.epochs:
            s.steps_per_epoch = self.steps_per_epoch()
            if s.batch == 0:
                engine.epoch_begin(s.epoch)
            self._offset, self._base, self._steps = s.batch, s.global_step, 0
            indices = self.sampler.layout(s.comm.rank, s.comm.size).tolist()
            logs = adapter.train_steps(self, indices) if len(indices) else {}
            # After a reset mid-epoch the epoch's logs cover the steps since the reset.
            s.batch, s.global_step = self._offset + self._steps, self._base + self._steps
            engine.epoch_end(logs)
            self.sampler.set_epoch(s.epoch)
            state.commit()
            if s.stop_training:
                break

    def step_begin(self, i: int) -> None:
        """Before step ``i``: commit when due (may raise ``HostsUpdatedInterrupt``), then the batch begin."""
        s = self.engine.state
        s.batch, s.global_step = self._offset + i, self._base + i
        if i > 0 and s.global_step % self.commit_every == 0:
            self.sampler.record(i, self.batch_size)
            assert self._state is not None, "step_begin() outside run()"
            self._state.commit()
        self._steps = i + 1
        self.engine.batch_begin(s.batch, global_step=s.global_step)

    def step_end(self, i: int, logs: Logs | None = None) -> None:
        """After step ``i``: the engine's batch end; records the recovery time after a reset."""
        self.engine.batch_end(logs, advance=self._advance)
        if self._failed_at is not None and self.resets:
            self.recovery_seconds.append(time.monotonic() - self._failed_at)
            self._failed_at = None

    def snapshot(self) -> Snapshot:
        """What a commit holds beside the framework state: counters, callbacks, LR, world size, data position."""
        s = self.engine.state
        self._last = {"counters": s.counters(), "callbacks": self.engine.dispatcher.state_dict(),
                      "lr": s.ops.get_lr(), "world_size": s.target_world_size, "sampler": self.sampler.state_dict()}
        return self._last

    def apply(self, snap: Snapshot | None = None) -> None:
        """Put a commit back, rescaled to the current world size; idempotent (never reads the current LR)."""
        snap = snap or self._last
        if not snap:
            return
        self.sampler.load_state_dict(snap["sampler"])
        self.engine.restore_progress(snap["counters"], snap["callbacks"], world_size=snap["world_size"],
                                     optimizer_lr=snap["lr"])
        self._last = snap

    def failure_noticed(self) -> None:
        """A collective failed: the state rolls back to the last commit."""
        self._failed_at = time.monotonic()

    def on_reset(self) -> None:
        """After Horovod re-initialised with a new set of workers."""
        self.resets += 1
        if self._failed_at is None:  # a host change (no rollback): noticed at this reset
            self._failed_at = time.monotonic()
        self.apply()  # the last commit (already restored after a failure), rescaled to the new size
        s = self.engine.state
        if s.is_root:
            log.warning("elastic reset #%d: %d worker(s) now; resuming from epoch %d, batch %d (step %d)",
                        self.resets, s.comm.size, s.epoch, s.batch, s.global_step)
        self.engine.fire(Event.RESET)
