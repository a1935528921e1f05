"""Training state shared by the engine and the callbacks, and the framework hooks it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hvdkit.core.comm import Comm
from hvdkit.core.types import Snapshot


@runtime_checkable
class FrameworkOps(Protocol):
    """What an adapter supplies so that framework-free callbacks can act on the model."""

    name: str

    @property
    def lr_in_momentum(self) -> bool:
        """True when the velocity holds the LR (Keras's SGD), so an LR change needs
        :func:`~hvdkit.core.lr.momentum_correction_factor`."""

    def get_lr(self) -> float:
        """The optimizer's current LR."""

    def set_lr(self, lr: float) -> None:
        """Set the optimizer's LR."""

    def scale_momentum(self, factor: float) -> None:
        """Multiply the optimizer's velocity buffers by ``factor``."""

    def capture(self) -> Snapshot:
        """Model, optimizer and RNG state as a host copy that later steps do not change."""

    def capture_staged(self) -> Snapshot:
        """:meth:`capture` for a snapshot written once and dropped before the next: buffers may be reused
        and the copy finished in the background, if :meth:`dump` and later state changes wait for it."""

    def restore(self, snapshot: Snapshot) -> None:
        """Put a :meth:`capture` snapshot back."""

    def dump(self, obj: Any) -> tuple[Any, Any]:
        """``obj`` as a JSON tree and a safetensors payload (:mod:`hvdkit.core.checkpoint_tree`)."""

    def loads(self, tree: Any, data: bytes) -> Any:
        """Rebuild what :meth:`dump` gave, without running code from the checkpoint."""

    def broadcast_state(self, root_rank: int, process_set: Any = None) -> bool | None:
        """A collective: every rank (of ``process_set``, if given) gets ``root_rank``'s model and optimizer
        state. False: nothing to broadcast yet (a lazily built model); the caller tries again later."""


#: The ``lr_factors`` key that LR callbacks which set the LR (rather than scale it) share: see :class:`TrainState`.
SET_LR_SLOT = "set"


@dataclass
class TrainState:
    """Where training stands; the engine updates it, callbacks read it and act on it.

    ``epoch`` and ``batch`` are 0-based; ``global_step`` counts optimizer steps before the current
    batch; ``steps_per_epoch`` and ``samples_per_step`` (over all ranks) are None if unknown.
    ``global_batch`` (if the adapter knows it) is what ``samples_per_step`` is made of: ``world_size``,
    ``batch_size`` per rank and ``accumulate_steps``; checkpoints record it, and the linear scaling rule
    rescales a resumed LR by the change of their product.

    ``target_lr`` is the optimizer's LR scaled for ``target_world_size`` workers; only
    :meth:`~hvdkit.core.engine.Engine.set_lr_target` changes either. Before each batch the engine sets
    ``target_lr * product(lr_factors)`` (``last_applied_lr``). The key :data:`SET_LR_SLOT` is shared by
    the callbacks that *set* the LR (Horovod's): the last to write it wins and its value stays.
    ``momentum_correction`` scales the velocity on LR changes (see ``FrameworkOps.lr_in_momentum``).

    ``resumed_epoch`` is the epoch a checkpoint put this run at (None for a fresh start);
    ``stop_training`` ends the run after the current epoch.
    """

    comm: Comm
    ops: FrameworkOps
    epochs: int = 0
    epoch: int = 0
    batch: int = 0
    global_step: int = 0
    steps_per_epoch: int | None = None
    samples_per_step: int | None = None
    global_batch: dict[str, int] | None = None
    target_lr: float | None = None
    target_world_size: int = 1
    lr_factors: dict[str, float] = field(default_factory=dict)
    last_applied_lr: float | None = None
    momentum_correction: bool = False
    logs: dict[str, Any] = field(default_factory=dict)
    history: dict[str, list[float]] = field(default_factory=dict)
    resumed_epoch: int | None = None
    stop_training: bool = False

    @property
    def is_root(self) -> bool:
        """True on rank 0."""
        return self.comm.rank == 0

    @property
    def elastic(self) -> bool:
        """True when workers may leave and join this run (:attr:`Comm.elastic <hvdkit.core.comm.Comm.elastic>`)."""
        return self.comm.elastic

    def counters(self) -> Snapshot:
        """The plain data checkpoints and elastic commits carry (they record the world size beside it)."""
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "global_step": self.global_step,
            "target_lr": self.target_lr,
            "last_applied_lr": self.last_applied_lr,  # a resume applies no LR the optimizer already has
            "global_batch": None if self.global_batch is None else dict(self.global_batch),
            "history": {k: list(v) for k, v in self.history.items()},
        }

    def load_counters(self, data: Snapshot) -> None:
        """Put back what :meth:`counters` gave (the target LR goes through the engine)."""
        self.epoch = int(data["epoch"])
        self.batch = int(data.get("batch", 0))
        self.global_step = int(data["global_step"])
        self.history = {k: list(v) for k, v in data.get("history", {}).items()}
