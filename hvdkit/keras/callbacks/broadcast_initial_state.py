"""Broadcast model and optimizer variables from rank 0 before the first step."""

from __future__ import annotations

from typing import cast

from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState
from hvdkit.keras.callbacks.bridge import EngineBridge
from hvdkit.keras.ops import KerasOps
from hvdkit.tensorflow.variables import broadcast_variables


class _BroadcastCore(Callback):
    order = -50  # after a checkpoint restore, before anything reads the weights

    def __init__(self, root_rank: int) -> None:
        self.root_rank = root_rank

    def on_train_begin(self, state: TrainState) -> None:
        if state.extra.get("elastic"):
            # fit_elastic's first sync broadcasts everything; a collective here would make a worker
            # that joins later wait in a broadcast no one else is in (horovod#2652).
            return
        ops = cast(KerasOps, state.ops)
        ops.ensure_built()  # create optimizer slots now, not after the first step
        broadcast_variables(list(ops.model.variables) + list(ops.optimizer.variables), root_rank=self.root_rank)


class BroadcastInitialState(EngineBridge):
    """At ``on_train_begin``, give every rank rank 0's model and optimizer variables.

    Unlike Horovod's ``BroadcastGlobalVariablesCallback`` (which broadcasts after
    the first batch), the optimizer is built first, so the very first step already
    starts from rank 0's weights even when ranks built their models differently.
    """

    def __init__(self, root_rank: int = 0) -> None:
        super().__init__(_BroadcastCore(root_rank))
