"""The Keras ``TensorBoard``: hvdkit's scalars from rank 0."""

from __future__ import annotations

import os

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class TensorBoard(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.TensorBoard` (same arguments).

    hvdkit's TensorBoard scalars from rank 0 (not Keras's own callback, which every rank would run);
    pass ``batch_size=`` (per rank) for samples per second."""

    core_class = core.TensorBoard
    core: core.TensorBoard

    def __init__(self, log_dir: str | os.PathLike[str], batch_every: int = 10, batch_size: int | None = None,
                 flush_secs: int = 30) -> None:
        super().__init__(core.TensorBoard(log_dir, batch_every, batch_size, flush_secs))
