"""The Keras ``MetricsLogger``: one row per epoch in a CSV or JSON-lines file."""

from __future__ import annotations

import os

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class MetricsLogger(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.MetricsLogger` (same arguments): one
    row per epoch (epoch, global step, every metric) appended to ``path``."""

    core_class = core.MetricsLogger
    core: core.MetricsLogger

    def __init__(self, path: str | os.PathLike[str], fmt: str | None = None) -> None:
        super().__init__(core.MetricsLogger(path, fmt))
