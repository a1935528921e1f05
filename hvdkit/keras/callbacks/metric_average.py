"""Keras wrapper of the shared :class:`hvdkit.callbacks.MetricAverage`."""

from __future__ import annotations

from hvdkit.callbacks.metric_average import MetricAverage as _Core
from hvdkit.keras.callbacks.bridge import EngineBridge


class MetricAverage(EngineBridge):
    """Replace the epoch logs (training and validation metrics) by their mean over ranks,
    in place, so ``History`` and Keras's progress bar show the global values."""

    def __init__(self) -> None:
        super().__init__(_Core())
