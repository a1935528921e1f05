"""Horovod 0.28.1's Keras callbacks (``hvd.callbacks.*``) as thin subclasses of hvdkit's core callbacks.

Horovod's constructors and semantics on hvdkit's one implementation of broadcast, metric averaging,
warm-up and schedules (no second copy of the maths). ``hvdkit.keras.callbacks`` turns them into Keras
callbacks (:mod:`hvdkit.keras.horovod_callbacks`). Differences from Horovod:

- ``BroadcastGlobalVariablesCallback`` broadcasts when training begins (before the first step) when
  the model is built, else before the second step (Horovod: after the first batch). ``device`` is
  accepted and has no effect (Horovod places the ops).
- The LR callbacks set the optimizer's LR to ``initial_lr`` times their multiplier, as Horovod's do;
  several of them combine by multiplying their factors (hvdkit's engine), which equals Horovod's
  "the last callback to set the LR wins" for the usual non-overlapping epoch ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hvdkit.callbacks.broadcast_initial_state import BroadcastInitialState
from hvdkit.callbacks.lr_schedule import LearningRateSchedule
from hvdkit.callbacks.lr_warmup import LearningRateWarmup
from hvdkit.callbacks.metric_average import MetricAverage
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_int, check_number


class BroadcastGlobalVariablesCallback(BroadcastInitialState):
    """Horovod's ``BroadcastGlobalVariablesCallback(root_rank, device='', local_variables=None)``: every rank
    starts from ``root_rank``'s model and optimizer variables."""

    def __init__(self, root_rank: int, device: str = "", local_variables: Any = None) -> None:
        if local_variables:
            raise ValueError("local_variables is not supported by hvdkit's BroadcastGlobalVariablesCallback: it "
                             f"broadcasts every model and optimizer variable, got {local_variables!r}")
        super().__init__(root_rank)
        self.device = device


class MetricAverageCallback(MetricAverage):
    """Horovod's ``MetricAverageCallback(device='')``: the epoch logs averaged over all ranks."""

    def __init__(self, device: str = "") -> None:
        super().__init__()
        self.device = device


class _InitialLr:
    """Sets the engine's target LR to Horovod's ``initial_lr`` when training starts (not after a resume)."""

    _engine: Any = None
    initial_lr: float = 0.0
    momentum_correction = True

    def bind(self, engine: Any) -> None:
        """Remember the engine (its ``set_lr_target`` sets the target LR)."""
        self._engine = engine

    def _set_target(self, state: TrainState) -> None:
        state.momentum_correction = self.momentum_correction
        if state.resumed_epoch is None and self._engine is not None:
            self._engine.set_lr_target(self.initial_lr, state.comm.size)

    def _log_lr(self, state: TrainState) -> None:
        state.logs["lr"] = state.ops.get_lr()  # Horovod logs the LR as 'lr'


def _initial_lr(value: Any) -> float:
    if value is None:
        raise ValueError("Parameter `initial_lr` is required")  # Horovod's message
    return check_number("initial_lr", value, minimum=0)


class LearningRateWarmupCallback(_InitialLr, LearningRateWarmup):
    """Horovod's ``LearningRateWarmupCallback(initial_lr, warmup_epochs=5, momentum_correction=True,
    steps_per_epoch=None, verbose=0)``: at epoch ``e``, batch ``b`` of the warm-up the LR is
    ``initial_lr / n * ((e + (b + 1) / S) * (n - 1) / warmup_epochs + 1)``, reaching ``initial_lr`` at
    the warm-up's last step (hvdkit's :class:`LearningRateWarmup` maths with the step counted as done)."""

    step_offset = 1

    def __init__(self, initial_lr: float, warmup_epochs: float = 5, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None, verbose: int = 0) -> None:
        self.initial_lr = _initial_lr(initial_lr)
        super().__init__(warmup_epochs=warmup_epochs, steps_per_epoch=steps_per_epoch,
                         momentum_correction=momentum_correction, verbose=False)
        self.horovod_verbose = verbose

    def on_train_begin(self, state: TrainState) -> None:
        """Target LR := ``initial_lr``; momentum correction as asked."""
        super().on_train_begin(state)
        self._set_target(state)

    def on_epoch_end(self, state: TrainState) -> None:
        """Log ``lr``; print Horovod's message when the warm-up ends (``verbose`` > 0, rank 0)."""
        self._log_lr(state)
        if self.horovod_verbose and state.is_root and state.epoch == math.ceil(self.warmup_epochs) - 1:
            print(f"\nEpoch {state.epoch + 1}: finished gradual learning rate warmup to {state.ops.get_lr():g}.")


class LearningRateScheduleCallback(_InitialLr, LearningRateSchedule):
    """Horovod's ``LearningRateScheduleCallback(initial_lr, multiplier, start_epoch=0, end_epoch=None,
    staircase=True, momentum_correction=True, steps_per_epoch=None)``: from ``start_epoch`` up to
    ``end_epoch`` the LR is ``initial_lr * multiplier(epoch)`` (a number ``m`` means
    ``m ** (epoch - start_epoch)``), with the epoch fractional unless ``staircase``; after ``end_epoch``
    it keeps its last value."""

    def __init__(self, initial_lr: float, multiplier: float | Callable[[float], float], start_epoch: int = 0,
                 end_epoch: int | None = None, staircase: bool = True, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None) -> None:
        self.initial_lr = _initial_lr(initial_lr)
        self.start_epoch = check_number("start_epoch", start_epoch, minimum=0)
        self.end_epoch = None if end_epoch is None else check_number("end_epoch", end_epoch, minimum=start_epoch)
        if steps_per_epoch is not None:
            check_int("steps_per_epoch", steps_per_epoch, minimum=1)
        self.steps_per_epoch = steps_per_epoch
        self.momentum_correction = bool(momentum_correction)
        if callable(multiplier):
            fn = multiplier
        else:
            m = check_number("multiplier", multiplier)
            fn = lambda epoch: m ** (epoch - self.start_epoch)  # noqa: E731  (Horovod's exponential decay)
        super().__init__(fn, staircase=staircase, name=f"horovod({start_epoch}..{end_epoch})")

    def on_train_begin(self, state: TrainState) -> None:
        """Target LR := ``initial_lr``; momentum correction as asked."""
        self._set_target(state)

    def on_batch_begin(self, state: TrainState) -> None:
        """Set this schedule's factor: 1 before ``start_epoch``, its last value after ``end_epoch``."""
        spe = self.steps_per_epoch or state.steps_per_epoch or 1
        if state.epoch < self.start_epoch:
            factor = 1.0
        elif self.end_epoch is not None and state.epoch >= self.end_epoch:
            factor = self.multiplier(self.end_epoch - 1 if self.staircase else self.end_epoch - 1 / spe)
        else:
            factor = self.multiplier(state.epoch if self.staircase else state.epoch + state.batch / spe)
        state.lr_factors[f"schedule:{id(self)}"] = float(factor)

    def on_epoch_end(self, state: TrainState) -> None:
        """Log ``lr`` as Horovod does."""
        self._log_lr(state)


__all__ = ["BroadcastGlobalVariablesCallback", "LearningRateScheduleCallback", "LearningRateWarmupCallback",
           "MetricAverageCallback"]
