"""The Keras ``ProgressBar``: hvdkit's tqdm bar on rank 0, in place of Keras's own."""

from __future__ import annotations

import keras

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import KerasLogs, keras_callback


class ProgressBar(keras_callback(core.ProgressBar), keras.callbacks.ProgbarLogger):  # type: ignore[misc]
    """hvdkit's progress bar (one tqdm bar per epoch, rank 0 only), the same class as
    :class:`hvdkit.callbacks.ProgressBar`. Being a ``ProgbarLogger`` too, it replaces the progress bar
    Keras would add for ``verbose=1``, on every rank; its own printing of validation and prediction
    progress is off."""

    def on_test_begin(self, logs: KerasLogs = None) -> None:
        """No validation progress bar."""
    def on_test_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """No validation progress bar."""
    def on_test_end(self, logs: KerasLogs = None) -> None:
        """No validation progress bar."""
    def on_predict_begin(self, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
    def on_predict_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
    def on_predict_end(self, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
