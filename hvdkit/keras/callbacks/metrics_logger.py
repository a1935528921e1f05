"""Keras wrapper of the shared :class:`hvdkit.callbacks.MetricsLogger`."""

from __future__ import annotations

import os

from hvdkit.callbacks.metrics_logger import MetricsLogger as _Core
from hvdkit.keras.callbacks.bridge import EngineBridge


class MetricsLogger(EngineBridge):
    """Rank 0 appends one row of (averaged) epoch metrics to a CSV/JSONL file, or prints it (``"-"``)."""

    def __init__(self, path: str | os.PathLike[str], fmt: str | None = None) -> None:
        super().__init__(_Core(path, fmt))
