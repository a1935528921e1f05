"""Keras's own progress bar on rank 0 only."""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as hvd
import keras


class ProgressBar(keras.callbacks.ProgbarLogger):
    """Pass it in ``callbacks`` (with any ``verbose``): Keras then uses it instead of its
    default progress bar, and it prints on rank 0 only."""

    def set_params(self, params: dict[str, Any]) -> None:
        super().set_params(params)
        if hvd.rank() != 0:
            self.verbose = 0
