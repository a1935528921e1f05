"""Keras wrapper of the shared :class:`hvdkit.callbacks.Checkpoint`, plus the resume epoch for ``fit``."""

from __future__ import annotations

import os

import keras

from hvdkit.callbacks.checkpoint import Checkpoint as _Core
from hvdkit.keras.callbacks.bridge import EngineBridge, _register, engine_for


class Checkpoint(EngineBridge):
    """Rank 0 writes model, optimizer, counters and callback states atomically every
    ``every_n_epochs`` epochs (keep-N, checksummed); resume broadcasts the newest valid one.

    Keras fixes the first epoch when ``fit`` starts, so resume before it::

        ckpt = Checkpoint("ckpt/")
        model.fit(x, y, epochs=10, initial_epoch=ckpt.resume_epoch(model), callbacks=[..., ckpt])

    ``resume_epoch`` restores everything and returns the epoch to continue from
    (0 without a checkpoint). Forgetting it while a checkpoint exists raises a
    clear error at the first epoch instead of silently training the wrong epochs.
    """

    def __init__(self, directory: str | os.PathLike[str], every_n_epochs: int = 1, keep: int = 3,
                 resume: bool = True) -> None:
        self.checkpoint = _Core(directory, every_n_epochs=every_n_epochs, keep=keep, resume=resume)
        super().__init__(self.checkpoint)

    def resume_epoch(self, model: keras.Model) -> int:
        if not model.built:
            raise ValueError("model must be built before resume_epoch(model): call model.build(...) or run "
                             "it on a batch first")
        engine = engine_for(model)
        core = self.checkpoint
        _register(engine, core)
        if not core.resume:
            return engine.state.epoch
        if core.restored is None:
            engine.state.target_lr = engine.state.ops.get_lr()
            engine.state.target_world_size = engine.state.comm.size
            if core.load_latest(engine.state) is not None:
                engine.state.extra["restored_epoch"] = engine.state.epoch
                engine.state.extra["restored_before_train"] = True
                core.resume = False  # already done: on_train_begin must not restore again
        return engine.state.epoch
