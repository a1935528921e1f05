"""Training state shared by the engine and the callbacks, and the framework hooks it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hvdkit.core.comm import Comm
from hvdkit.core.types import Snapshot


@runtime_checkable
class FrameworkOps(Protocol):
    """What an adapter supplies so that framework-free callbacks can act on the model.

    ``lr_in_momentum`` is True for optimizers whose velocity holds the LR
    (Keras's SGD: ``v = m*v - lr*g``); when the LR changes from ``a`` to ``b``
    they need Goyal et al.'s momentum correction, ``scale_momentum(b / a)``,
    which multiplies the velocity buffers. ``capture``/``restore`` give and take
    a snapshot of model, optimizer and RNG state; ``dump`` splits one into a JSON
    tree and a safetensors payload, and ``loads`` joins them back. ``broadcast_state`` gives every
    rank ``root_rank``'s model and optimizer state (a collective: every rank calls it).
    """

    name: str

    @property
    def lr_in_momentum(self) -> bool:
        """True when the optimizer's velocity holds the LR (momentum correction applies)."""

    def get_lr(self) -> float:
        """The optimizer's current LR."""

    def set_lr(self, lr: float) -> None:
        """Set the optimizer's LR."""

    def scale_momentum(self, factor: float) -> None:
        """Multiply the optimizer's velocity buffers by ``factor``."""

    def capture(self) -> Snapshot:
        """A snapshot of model, optimizer and RNG state: a copy in host memory that later training steps
        do not change (a background thread may serialise it while training goes on)."""

    def capture_staged(self) -> Snapshot:
        """:meth:`capture` for a snapshot that is written once and dropped before the next one is taken
        (an asynchronous checkpoint): the adapter may reuse host buffers between calls and finish the copy
        in the background, as long as :meth:`dump` and every later change of the state wait for it."""

    def restore(self, snapshot: Snapshot) -> None:
        """Put a :meth:`capture` snapshot back."""

    def dump(self, obj: Any) -> tuple[Any, Any]:
        """``obj`` as a checkpoint's JSON tree and a payload (``hvdkit.core.atomic_file.Payload``) that
        writes its tensors as a safetensors file (:mod:`hvdkit.core.checkpoint_tree`)."""

    def loads(self, tree: Any, data: bytes) -> Any:
        """Rebuild what :meth:`dump` gave from the JSON tree and the safetensors file's bytes, without
        running code from either."""

    def broadcast_state(self, root_rank: int, process_set: Any = None) -> bool | None:
        """Every rank gets ``root_rank``'s model and optimizer state (with ``process_set``: every member of
        that Horovod process set, ``root_rank`` a global rank in it). False: nothing to broadcast yet (a model
        built lazily by its first step); the caller tries again later."""


#: The ``lr_factors`` key that LR callbacks which set the LR (rather than scale it) share: see :class:`TrainState`.
SET_LR_SLOT = "set"


@dataclass
class TrainState:
    """Where training stands; the engine updates it, callbacks read it and act on it.

    Counters: ``epoch`` is the 0-based epoch being (or about to be) trained, ``batch`` the 0-based
    batch within it, ``global_step`` the number of optimizer steps taken before the current batch,
    ``epochs`` the epoch to stop at and ``steps_per_epoch`` the batches per epoch (None if unknown).
    ``samples_per_step``: the samples one optimizer step trains on, over all ranks (None if unknown).

    Learning rate: ``target_lr`` is the LR the optimizer was built with, already scaled for
    ``target_world_size`` workers (the linear scaling rule); only
    :meth:`~hvdkit.core.engine.Engine.set_lr_target` changes either. LR callbacks write multipliers
    into ``lr_factors``; before each batch the engine sets ``target_lr * product(lr_factors)``
    (``last_applied_lr``). Factors under their own keys (hvdkit's warm-up and schedules) multiply;
    the key :data:`SET_LR_SLOT` is shared by the callbacks that *set* the LR rather than scale it
    (Horovod's ``LearningRateWarmupCallback``/``LearningRateScheduleCallback``): each writes it while
    its epoch range covers the batch, so the last one to write wins and its value stays after its
    range ends. ``momentum_correction``: scale the optimizer's velocity when the LR changes, for
    optimizers whose velocity holds the LR (set by the LR callbacks).

    ``logs`` are the current batch's or epoch's metrics, ``history`` every finished epoch's.
    ``resumed_epoch`` is the epoch a checkpoint put this run at (None when it started fresh).
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
        """The plain-data part of the state that checkpoints and elastic commits carry.

        The world size ``target_lr`` is scaled for is not among them: a checkpoint's manifest and an
        elastic commit record it once, beside these.
        """
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "global_step": self.global_step,
            "target_lr": self.target_lr,
            "history": {k: list(v) for k, v in self.history.items()},
        }

    def load_counters(self, data: Snapshot) -> None:
        """Put back what :meth:`counters` gave (the target LR goes through the engine)."""
        self.epoch = int(data["epoch"])
        self.batch = int(data.get("batch", 0))
        self.global_step = int(data["global_step"])
        self.history = {k: list(v) for k, v in data.get("history", {}).items()}
