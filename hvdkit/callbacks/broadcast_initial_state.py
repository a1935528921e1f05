"""Give every rank rank 0's model and optimizer state before the first step."""

from __future__ import annotations

from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.process_set import check_process_set, scoped
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_int


class BroadcastInitialState(Callback):
    """At ``on_train_begin``, after a checkpoint restore, broadcast model and optimizer state (slots
    created first) from ``root_rank``, so the first step starts from its weights. A model with no
    variables yet (built by its first step) is broadcast before the second step.

    Does nothing under elastic training: the first sync broadcasts, and a collective here would make a
    late joiner wait alone. PyTorch's ``distribute`` already broadcasts. With ``process_set=`` the
    broadcast stays within the set, from its ``root_rank``-th member.
    """

    order = -50  # after a checkpoint restore, before anything reads the weights

    def __init__(self, root_rank: int = 0, process_set: Any = None) -> None:
        self.root_rank = check_int("root_rank", root_rank, minimum=0)
        self.process_set = check_process_set(process_set)
        self._pending = False

    def _broadcast(self, state: TrainState) -> bool:
        """One broadcast from the root; False when the model has nothing to broadcast yet."""
        if self.process_set is None:
            return state.ops.broadcast_state(self.root_rank) is not False
        root = sorted(int(r) for r in self.process_set.ranks)[self.root_rank]  # its global rank
        return state.ops.broadcast_state(root, process_set=self.process_set) is not False

    def on_train_begin(self, state: TrainState) -> None:
        """Broadcast model and optimizer state from ``root_rank`` (not under elastic training)."""
        size = scoped(state.comm, self.process_set).size  # refuses a set this rank is not in
        if state.elastic or state.comm.size == 1:  # a set of one still takes part (torch's exchange is world-wide)
            return
        if self.root_rank >= size:
            where = "the number of workers" if self.process_set is None else "the size of process_set"
            raise ValueError(f"root_rank must be < {where} ({size}), got {self.root_rank}")
        self._pending = not self._broadcast(state)

    def on_batch_begin(self, state: TrainState) -> None:
        """If the model was not built when training began, broadcast as soon as it is (before step 2)."""
        if self._pending:
            self._pending = not self._broadcast(state)

    def __repr__(self) -> str:
        return f"BroadcastInitialState(root_rank={self.root_rank}, process_set={self.process_set!r})"
