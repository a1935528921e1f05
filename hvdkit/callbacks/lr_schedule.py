"""Learning-rate schedules after warm-up: step decay, cosine, or any function of the epoch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hvdkit.core import lr as lrmath
from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_callable, check_choice, check_number


class LearningRateSchedule(Callback):
    """Multiply the target LR by a schedule of the fractional epoch, every batch:
    ``LearningRateSchedule.step_decay([30, 60], gamma=0.1)``, ``.cosine(end_epoch=90, start_epoch=5)``, or
    ``LearningRateSchedule(lambda epoch: 0.5 ** (epoch // 10))``. Its factor multiplies warm-up's."""

    order = -10

    def __init__(self, multiplier: Callable[[float], float], *, staircase: bool = False,
                 name: str = "function") -> None:
        self.multiplier = check_callable("multiplier", multiplier)
        self.staircase = bool(staircase)
        self.name = name

    @classmethod
    def step_decay(cls, milestones: Sequence[int], gamma: float = 0.1) -> LearningRateSchedule:
        """Multiply the LR by ``gamma`` at each epoch in ``milestones``."""
        if isinstance(milestones, (str, bytes)) or not isinstance(milestones, Sequence) or not milestones:
            raise ValueError(f"milestones must be a non-empty sequence of epochs, got {milestones!r}")
        ms = list(milestones)
        if any(isinstance(m, bool) or not isinstance(m, int) or m < 0 for m in ms) or ms != sorted(ms):
            raise ValueError(f"milestones must be increasing non-negative integers, got {milestones!r}")
        g = check_number("gamma", gamma, minimum=0, maximum=1, strict_min=True)
        return cls(lambda e: lrmath.step_decay_factor(e, ms, g), staircase=True, name=f"step_decay({ms}, {g:g})")

    @classmethod
    def cosine(cls, end_epoch: float, start_epoch: float = 0.0, min_factor: float = 0.0) -> LearningRateSchedule:
        """Cosine decay from 1 at ``start_epoch`` to ``min_factor`` at ``end_epoch`` (fractional epochs)."""
        start = check_number("start_epoch", start_epoch, minimum=0)
        end = check_number("end_epoch", end_epoch, minimum=start, strict_min=True)
        lo = check_number("min_factor", min_factor, minimum=0, maximum=1)
        return cls(lambda e: lrmath.cosine_factor(e, start, end, lo), name=f"cosine({start:g}..{end:g})")

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> LearningRateSchedule:
        """Build a schedule by name (``"step_decay"`` or ``"cosine"``) with that constructor's arguments."""
        check_choice("name", name, ["step_decay", "cosine"])
        return getattr(cls, name)(**kwargs)

    def on_batch_begin(self, state: TrainState) -> None:
        """Set this schedule's LR factor for the current (fractional) epoch."""
        epoch = float(state.epoch) if self.staircase else lrmath.fractional_epoch(
            state.epoch, state.batch, state.steps_per_epoch)
        factor = self.multiplier(epoch)
        check_number("the schedule's multiplier", factor, minimum=0)
        state.lr_factors[f"schedule:{id(self)}"] = float(factor)

    def __repr__(self) -> str:
        return f"LearningRateSchedule({self.name})"
