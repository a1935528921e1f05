"""The Keras ``Checkpoint``: the core one, plus the resume epoch ``model.fit`` needs up front."""

from __future__ import annotations

import os
from typing import Any

import keras

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge, engine_for


class Checkpoint(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.Checkpoint` (same arguments).

    Rank 0 writes model, optimizer, counters and callback states atomically every ``every_n_epochs``
    epochs (keep-N, checksummed); resume broadcasts the newest valid one.

    Keras fixes the first epoch when ``fit`` starts, so resume before it::

        ckpt = Checkpoint("ckpt/")
        model.fit(x, y, epochs=10, initial_epoch=ckpt.resume_epoch(model), callbacks=[..., ckpt])

    ``resume_epoch`` restores everything and returns the epoch to continue from (0 without a
    checkpoint). Without it, a checkpoint found at ``fit``'s start raises a clear error before the
    first step instead of silently training the wrong epochs.
    """

    core_class = core.Checkpoint
    core: core.Checkpoint

    def __init__(self, directory: str | os.PathLike[str], every_n_epochs: int = 1, keep: int = 3,
                 resume: bool = True, trust_pickle: bool = False, async_save: bool = True,
                 process_set: Any = None, on_signal: str = "save") -> None:
        super().__init__(core.Checkpoint(directory, every_n_epochs, keep, resume, trust_pickle, async_save,
                                         process_set, on_signal))

    def resume_epoch(self, model: keras.Model) -> int:
        """Restore the newest valid checkpoint into ``model`` now; return the epoch to pass as
        ``initial_epoch`` (0 when there is none, or with ``resume=False``)."""
        if not model.built:
            raise ValueError("model must be built before resume_epoch(model): call model.build(...) or run "
                             "it on a batch first")
        engine = engine_for(model)
        engine.register(self.core)
        ckpt = self.core
        if ckpt.resume and ckpt.restored is None:
            ckpt.load_latest(engine.state)
        return engine.state.epoch
