"""The Keras ``LearningRateSchedule``: step decay, cosine, or any multiplier of the epoch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class LearningRateSchedule(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.LearningRateSchedule` (same arguments
    and constructors, each returning this Keras class)."""

    core_class = core.LearningRateSchedule
    core: core.LearningRateSchedule

    def __init__(self, multiplier: Callable[[float], float], *, staircase: bool = False,
                 name: str = "function") -> None:
        super().__init__(core.LearningRateSchedule(multiplier, staircase=staircase, name=name))

    @classmethod
    def step_decay(cls, milestones: Sequence[int], gamma: float = 0.1) -> LearningRateSchedule:
        """Multiply the LR by ``gamma`` at each epoch in ``milestones``."""
        return cls.from_core(core.LearningRateSchedule.step_decay(milestones, gamma))

    @classmethod
    def cosine(cls, end_epoch: float, start_epoch: float = 0.0, min_factor: float = 0.0) -> LearningRateSchedule:
        """Cosine decay from 1 at ``start_epoch`` to ``min_factor`` at ``end_epoch`` (fractional epochs)."""
        return cls.from_core(core.LearningRateSchedule.cosine(end_epoch, start_epoch, min_factor))

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> LearningRateSchedule:
        """Build a schedule by name (``"step_decay"`` or ``"cosine"``) with that constructor's arguments."""
        return cls.from_core(core.LearningRateSchedule.from_name(name, **kwargs))
