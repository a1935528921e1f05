"""Checkpointing: rank 0 writes atomically (keep-N, checksummed); resume broadcasts to all ranks."""

from __future__ import annotations

import logging
import os

from hvdkit.core.callback import Callback
from hvdkit.core.checkpoint_store import CheckpointStore, Manifest
from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.state import TrainState
from hvdkit.core.types import Snapshot
from hvdkit.core.validation import check_int

log = logging.getLogger("hvdkit")


class Checkpoint(Callback):
    """Save model, optimizer, counters, callback states and RNG every ``every_n_epochs`` epochs.

    With ``resume=True``, training starts from the newest checkpoint whose checksum
    verifies: rank 0 reads it once and broadcasts it to every rank. A checkpoint
    written by a different number of workers is resumed with the LR rescaled by the
    linear scaling rule (a warning says so).
    """

    order = -100  # restore before any callback reads the state

    def __init__(self, directory: str | os.PathLike[str], every_n_epochs: int = 1, keep: int = 3,
                 resume: bool = True) -> None:
        if not isinstance(directory, (str, os.PathLike)) or not str(directory):
            raise ValueError(f"directory must be a non-empty path, got {directory!r}")
        self.every_n_epochs = check_int("every_n_epochs", every_n_epochs, minimum=1)
        self.store = CheckpointStore(directory, keep=keep)
        self.resume = bool(resume)
        self.restored: Manifest | None = None
        self.last_saved: Manifest | None = None
        self._engine: Engine | None = None

    @property
    def directory(self) -> os.PathLike[str]:
        """The checkpoint folder."""
        return self.store.directory

    def bind(self, engine: Engine) -> None:
        """Remember the engine: its callbacks' states go into every checkpoint."""
        self._engine = engine

    @property
    def engine(self) -> Engine:
        """The engine this checkpoint belongs to (set when training starts)."""
        if self._engine is None:
            raise RuntimeError("Checkpoint is not attached to a training run yet (pass it in callbacks)")
        return self._engine

    # -- saving ---------------------------------------------------------------
    def snapshot(self, state: TrainState) -> Snapshot:
        """Model, optimizer and RNG state, counters and every callback's state (the world size the
        LR is scaled for goes into the manifest)."""
        return {
            "framework": state.ops.capture(),
            "counters": state.counters(),
            "callbacks": self.engine.dispatcher.state_dict(),
        }

    def save(self, state: TrainState) -> Manifest | None:
        """Write a checkpoint now (rank 0 only; other ranks return None)."""
        if not state.is_root:
            return None
        snap = self.snapshot(state)
        self.last_saved = self.store.save(lambda f: state.ops.dump(snap, f), epoch=state.epoch,
                                          global_step=state.global_step,
                                          world_size=state.target_world_size, framework=state.ops.name)
        return self.last_saved

    def on_epoch_save(self, state: TrainState) -> None:
        # Fired after on_epoch_end: state.epoch already counts the finished epoch.
        """Save every ``every_n_epochs`` epochs and after the last one."""
        last = bool(state.epochs) and state.epoch >= state.epochs
        if state.epoch % self.every_n_epochs == 0 or last:
            self.save(state)
            self.engine.fire(Event.CHECKPOINT_SAVED)

    # -- resuming -------------------------------------------------------------
    def load_latest(self, state: TrainState) -> Manifest | None:
        """Rank 0 reads the newest valid checkpoint, every rank gets it; returns its manifest.

        Under elastic training (``state.elastic``) only rank 0 loads, with no collective:
        the elastic state's first sync hands everything to the other workers, and a worker that
        joins later never waits in a broadcast that nobody else is in (horovod#2652).
        """
        found = self.store.latest() if state.is_root else None
        if state.elastic:
            blob = found
        else:
            blob = state.comm.broadcast_object(None if found is None else (found[0], found[1]), 0)
        if blob is None:
            return None
        manifest, data = blob
        snap = state.ops.loads(data)
        state.ops.restore(snap["framework"])
        self.engine.restore_progress(snap["counters"], snap.get("callbacks", {}), world_size=manifest.world_size,
                                     optimizer_lr=state.ops.get_lr())
        state.resumed_epoch = state.epoch
        if state.is_root:
            log.info("resumed from %s (epoch %d, step %d)", manifest.payload, manifest.epoch, manifest.global_step)
        self.restored = manifest
        return manifest

    def on_train_begin(self, state: TrainState) -> None:
        """With ``resume``, restore the newest valid checkpoint (once per run)."""
        if self.resume and self.restored is None and self.load_latest(state) is not None:
            self.engine.fire(Event.CHECKPOINT_RESTORED)

    def __repr__(self) -> str:
        return (f"Checkpoint({str(self.store.directory)!r}, every_n_epochs={self.every_n_epochs}, "
                f"keep={self.store.keep})")
