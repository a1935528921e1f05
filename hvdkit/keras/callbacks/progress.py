"""The Keras ``ProgressBar``: hvdkit's tqdm bar on rank 0, in place of Keras's own."""

from __future__ import annotations

from typing import Any

import keras

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge, KerasLogs


class ProgressBar(EngineBridge, keras.callbacks.ProgbarLogger):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.ProgressBar` (same arguments): one
    tqdm bar per epoch, rank 0 only. Being a ``ProgbarLogger`` too, it replaces the progress bar
    Keras would add for ``verbose=1``, on every rank; its own printing of validation and prediction
    progress is off."""

    core_class = core.ProgressBar
    core: core.ProgressBar

    def __init__(self, leave: bool = True, **tqdm_kwargs: Any) -> None:
        super().__init__(core.ProgressBar(leave, **tqdm_kwargs))

    def on_test_begin(self, logs: KerasLogs = None) -> None:
        """No validation progress bar (the engine's eval event still fires)."""
        EngineBridge.on_test_begin(self, logs)
    def on_test_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """No validation progress bar."""
    def on_test_end(self, logs: KerasLogs = None) -> None:
        """No validation progress bar (the engine's eval event still fires)."""
        EngineBridge.on_test_end(self, logs)
    def on_predict_begin(self, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
    def on_predict_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
    def on_predict_end(self, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
