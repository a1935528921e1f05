"""The Keras ``BroadcastInitialState``: every rank starts from the root's model and optimizer variables."""

from __future__ import annotations

from typing import Any

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class BroadcastInitialState(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.BroadcastInitialState` (same arguments):
    the root rank's model and optimizer variables go to every rank before the first step."""

    core_class = core.BroadcastInitialState
    core: core.BroadcastInitialState

    def __init__(self, root_rank: int = 0, process_set: Any = None) -> None:
        super().__init__(core.BroadcastInitialState(root_rank, process_set))
