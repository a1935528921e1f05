"""Learning-rate callbacks: gradual warm-up under the linear scaling rule (Goyal et al. 2017), and
schedules after it (step decay, cosine, or any function of the epoch)."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

from hvdkit.core import lr as lrmath
from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_callable, check_choice, check_int, check_number


class LearningRateWarmup(Callback):
    """Ramp the LR from ``T/n`` to ``T`` over ``warmup_epochs`` epochs, updated every batch.

    ``T`` is the LR the optimizer was built with (already scaled by the number of
    workers ``n``). Global step ``k < W*S`` uses ``T * (1/n + (1 - 1/n) * k / (W*S))``.
    ``steps_per_epoch`` defaults to what the trainer (or ``model.fit``) reports.
    ``momentum_correction`` applies Goyal et al.'s correction for optimizers whose
    velocity holds the LR (Keras SGD); PyTorch's SGD needs none and ignores it.
    """

    order = -10

    def __init__(self, warmup_epochs: float = 5, steps_per_epoch: int | None = None,
                 momentum_correction: bool = True, verbose: bool = False) -> None:
        self.warmup_epochs = check_number("warmup_epochs", warmup_epochs, minimum=0)
        if steps_per_epoch is not None:
            steps_per_epoch = check_int("steps_per_epoch", steps_per_epoch, minimum=1)
        self.steps_per_epoch = steps_per_epoch
        self.momentum_correction = bool(momentum_correction)
        self.verbose = bool(verbose)
        self._done_logged = False

    def warmup_steps(self, state: TrainState) -> int:
        """The warm-up length in optimizer steps."""
        spe = self.steps_per_epoch or state.steps_per_epoch
        if not spe:
            raise ValueError(
                "LearningRateWarmup needs steps_per_epoch: pass steps_per_epoch=... or use a trainer "
                "that knows the number of batches per epoch, got None"
            )
        return round(self.warmup_epochs * spe)

    def on_train_begin(self, state: TrainState) -> None:
        """Tell the engine whether to apply momentum correction."""
        state.momentum_correction = self.momentum_correction

    def on_batch_begin(self, state: TrainState) -> None:
        """Set the warm-up LR factor for the current global step."""
        factor = lrmath.warmup_factor(state.global_step, self.warmup_steps(state), state.comm.size)
        state.lr_factors["warmup"] = factor
        if factor == 1.0 and self.verbose and state.is_root and not self._done_logged:
            self._done_logged = True
            print(f"LearningRateWarmup: warm-up done at step {state.global_step}, lr={state.target_lr:g}")

    def __repr__(self) -> str:
        return f"LearningRateWarmup(warmup_epochs={self.warmup_epochs:g})"

    def state_dict(self) -> dict[str, Any]:
        """Whether the end of the warm-up was logged."""
        return {"done_logged": self._done_logged}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._done_logged = bool(state.get("done_logged", False))


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
        if any(isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 0 for m in milestones) \
                or list(milestones) != sorted(milestones):
            raise ValueError(f"milestones must be increasing non-negative integers, got {milestones!r}")
        ms = [int(m) for m in milestones]
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
