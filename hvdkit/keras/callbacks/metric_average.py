"""The Keras ``MetricAverage``: epoch logs averaged over ranks."""

from __future__ import annotations

from typing import Any

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class MetricAverage(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.MetricAverage` (same arguments).

    Averages the epoch logs (training and validation metrics) over ranks in place, so ``History`` and
    Keras's progress bar show the global values."""

    core_class = core.MetricAverage
    core: core.MetricAverage

    def __init__(self, process_set: Any = None) -> None:
        super().__init__(core.MetricAverage(process_set))
