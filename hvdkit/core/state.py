"""Training state shared by the engine and the callbacks, and the framework hooks it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hvdkit.core.comm import Comm


@runtime_checkable
class FrameworkOps(Protocol):
    """What an adapter supplies so that framework-free callbacks can act on the model.

    ``lr_in_momentum`` is True for optimizers whose velocity holds the LR
    (Keras's SGD: ``v = m*v - lr*g``); when the LR changes from ``a`` to ``b``
    they need Goyal et al.'s momentum correction, ``scale_momentum(b / a)``,
    which multiplies the velocity buffers. ``capture``/``restore`` give and take
    a snapshot of model, optimizer and RNG state; ``dump`` serialises one into a
    binary file object and ``loads`` reads it back from bytes.
    """

    name: str

    @property
    def lr_in_momentum(self) -> bool: ...

    def get_lr(self) -> float: ...
    def set_lr(self, lr: float) -> None: ...
    def scale_momentum(self, factor: float) -> None: ...
    def capture(self) -> dict[str, Any]: ...
    def restore(self, snapshot: dict[str, Any]) -> None: ...
    def dump(self, obj: Any, f: Any) -> None: ...
    def loads(self, data: bytes) -> Any: ...


@dataclass
class TrainState:
    """Where training stands; the engine updates it, callbacks read it and act on it.

    ``epoch`` is the 0-based epoch being (or about to be) trained, ``batch`` the
    0-based batch within it, ``global_step`` the number of optimizer steps taken
    before the current batch. ``target_lr`` is the LR the optimizer was built
    with (already scaled by the world size it was built for, ``target_world_size``).
    LR callbacks write multipliers into ``lr_factors``; the engine applies
    ``target_lr * product(lr_factors)`` before each batch.
    """

    comm: Comm
    ops: FrameworkOps
    epochs: int = 0
    epoch: int = 0
    batch: int = 0
    global_step: int = 0
    steps_per_epoch: int | None = None
    target_lr: float | None = None
    target_world_size: int = 1
    lr_factors: dict[str, float] = field(default_factory=dict)
    logs: dict[str, Any] = field(default_factory=dict)
    history: dict[str, list[float]] = field(default_factory=dict)
    stop_training: bool = False
    last_applied_lr: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        return self.comm.rank == 0

    def counters(self) -> dict[str, Any]:
        """The plain-data part of the state that checkpoints and elastic commits carry."""
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "global_step": self.global_step,
            "target_lr": self.target_lr,
            "target_world_size": self.target_world_size,
            "history": {k: list(v) for k, v in self.history.items()},
        }

    def load_counters(self, data: dict[str, Any]) -> None:
        self.epoch = int(data["epoch"])
        self.batch = int(data.get("batch", 0))
        self.global_step = int(data["global_step"])
        self.target_lr = data.get("target_lr")
        self.target_world_size = int(data.get("target_world_size", 1))
        self.history = {k: list(v) for k, v in data.get("history", {}).items()}
