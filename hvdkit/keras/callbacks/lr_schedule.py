"""Keras wrapper of the shared :class:`hvdkit.callbacks.LearningRateSchedule`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hvdkit.callbacks.lr_schedule import LearningRateSchedule as _Core
from hvdkit.keras.callbacks.bridge import EngineBridge


class LearningRateSchedule(EngineBridge):
    """Multiply the target LR by a function of the fractional epoch, every batch
    (composes with :class:`LearningRateWarmup`). Constructors mirror the core class."""

    def __init__(self, multiplier: Callable[[float], float] | _Core, **kwargs: Any) -> None:
        super().__init__(multiplier if isinstance(multiplier, _Core) else _Core(multiplier, **kwargs))

    @classmethod
    def step_decay(cls, milestones: Sequence[int], gamma: float = 0.1) -> LearningRateSchedule:
        return cls(_Core.step_decay(milestones, gamma))

    @classmethod
    def cosine(cls, end_epoch: float, start_epoch: float = 0.0, min_factor: float = 0.0) -> LearningRateSchedule:
        return cls(_Core.cosine(end_epoch, start_epoch, min_factor))
