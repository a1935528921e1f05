"""Horovod 0.28.1's Keras callbacks (``hvd.callbacks.*``) as core callbacks on hvdkit's engine, with
Horovod's constructors and semantics (:mod:`hvdkit.compat.horovod.keras_callbacks` makes them Keras callbacks).

Differences: ``BroadcastGlobalVariablesCallback`` broadcasts before the first step when the model is built
(else before the second); ``device`` has no effect. The LR callbacks set one shared factor
(:data:`~hvdkit.core.state.SET_LR_SLOT`) on the target LR ``initial_lr``, so an elastic resize rescales it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hvdkit.callbacks.broadcast_initial_state import BroadcastInitialState
from hvdkit.callbacks.lr import LearningRateSchedule
from hvdkit.callbacks.metric_average import MetricAverage
from hvdkit.core import lr as lrmath
from hvdkit.core.callback import Callback
from hvdkit.core.state import SET_LR_SLOT, TrainState
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


class _HorovodLr(Callback):
    """Horovod's ``LearningRateScheduleCallbackImpl``: in ``[start_epoch, end_epoch)`` the LR is
    ``initial_lr * multiplier``, written as a factor on the engine's target LR (the last Horovod LR
    callback's ``initial_lr``); outside it the LR is left alone, so the last callback in range wins."""

    order = LearningRateSchedule.order

    def __init__(self, initial_lr: Any, start_epoch: float, end_epoch: float | None, staircase: bool,
                 momentum_correction: bool, steps_per_epoch: int | None) -> None:
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")  # Horovod's message
        self.initial_lr = check_number("initial_lr", initial_lr, minimum=0)
        self.start_epoch = check_number("start_epoch", start_epoch, minimum=0)
        self.end_epoch = None if end_epoch is None else check_number("end_epoch", end_epoch, minimum=start_epoch)
        if steps_per_epoch is not None:
            check_int("steps_per_epoch", steps_per_epoch, minimum=1)
        self.steps_per_epoch = steps_per_epoch
        self.staircase = bool(staircase)
        self.momentum_correction = bool(momentum_correction)
        self._engine: Any = None
        self._set_this_run = False

    def bind(self, engine: Any) -> None:
        """Remember the engine (its ``set_lr_target`` sets the target LR)."""
        self._engine = engine

    def multiplier_at(self, epoch: float, state: TrainState) -> float:
        """The multiplier on ``initial_lr`` at the (fractional) ``epoch``."""
        raise NotImplementedError

    def on_train_begin(self, state: TrainState) -> None:
        """Target LR := ``initial_lr`` (not after a resume); a fractional-epoch schedule needs steps per epoch."""
        self._set_this_run = False
        if not self.staircase and not (self.steps_per_epoch or state.steps_per_epoch):
            raise ValueError(  # Horovod's message, and why
                "Could not autodetect the number of steps per epoch. Please specify the steps_per_epoch "
                f"parameter to the {type(self).__name__}() (got None, and fit's data has no known length)")
        if state.resumed_epoch is None and self._engine is not None:
            self._engine.set_lr_target(self.initial_lr, state.comm.size)

    def on_batch_begin(self, state: TrainState) -> None:
        """In range, set the LR: every batch, or (``staircase``) at an epoch's first batch and a run's first."""
        if state.epoch < self.start_epoch or (self.end_epoch is not None and state.epoch >= self.end_epoch):
            return  # Horovod: outside of the adjustment scope, the LR is left alone
        if self.staircase and state.batch != 0 and self._set_this_run:
            return
        epoch = float(state.epoch) if self.staircase else lrmath.fractional_epoch(
            state.epoch, state.batch, self.steps_per_epoch or state.steps_per_epoch)
        value = self.multiplier_at(epoch, state)
        try:
            value = float(value)  # numpy scalars
        except (TypeError, ValueError):
            pass
        m = check_number(f"the multiplier of {self!r} at epoch {epoch:g}", value)
        ref = self._reference_lr()
        state.lr_factors[SET_LR_SLOT] = m * self.initial_lr / ref if ref else 0.0
        state.momentum_correction = self.momentum_correction
        self._set_this_run = True

    def _reference_lr(self) -> float:
        """The ``initial_lr`` the engine's target LR was set to: the last Horovod LR callback's."""
        callbacks = self._engine.callbacks if self._engine is not None else [self]
        return [cb.initial_lr for cb in callbacks if isinstance(cb, _HorovodLr)][-1]

    def on_epoch_end(self, state: TrainState) -> None:
        """Log ``lr`` as Horovod does."""
        state.logs["lr"] = state.ops.get_lr()

    def __repr__(self) -> str:
        end = "None" if self.end_epoch is None else f"{self.end_epoch:g}"
        return f"{type(self).__name__}(initial_lr={self.initial_lr:g}, epochs {self.start_epoch:g}..{end})"


class LearningRateScheduleCallback(_HorovodLr):
    """Horovod's ``LearningRateScheduleCallback``: in range the LR is ``initial_lr * multiplier(epoch)``
    (a number ``m`` means ``m ** (epoch - start_epoch)``), set at each epoch's first batch, or every
    batch with a fractional epoch when not ``staircase``."""

    def __init__(self, initial_lr: float, multiplier: float | Callable[[float], float], start_epoch: int = 0,
                 end_epoch: int | None = None, staircase: bool = True, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None) -> None:
        super().__init__(initial_lr, start_epoch, end_epoch, staircase, momentum_correction, steps_per_epoch)
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            m = check_number("multiplier", multiplier)
            self.multiplier = lambda epoch: m ** (epoch - start_epoch)  # Horovod's exponential decay

    def multiplier_at(self, epoch: float, state: TrainState) -> float:
        """``multiplier(epoch)``."""
        return self.multiplier(epoch)


class LearningRateWarmupCallback(_HorovodLr):
    """Horovod's ``LearningRateWarmupCallback``: over epochs ``[0, warmup_epochs)``, every batch, the LR is
    ``initial_lr / n * ((e + (b + 1) / S) * (n - 1) / warmup_epochs + 1)``, reaching ``initial_lr`` at the
    last step (a fractional ``warmup_epochs`` runs to the end of its partial epoch, as in Horovod)."""

    def __init__(self, initial_lr: float, warmup_epochs: float = 5, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None, verbose: int = 0) -> None:
        self.warmup_epochs = check_number("warmup_epochs", warmup_epochs, minimum=0)
        super().__init__(initial_lr, 0, self.warmup_epochs, False, momentum_correction, steps_per_epoch)
        self.verbose = verbose

    def multiplier_at(self, epoch: float, state: TrainState) -> float:
        """Horovod's warm-up multiplier at the fractional ``epoch``, ``n`` being the current world size."""
        spe = self.steps_per_epoch or state.steps_per_epoch or 1
        return lrmath.linear_warmup_factor((epoch + 1 / spe) / self.warmup_epochs, state.comm.size)

    def on_epoch_end(self, state: TrainState) -> None:
        """Log ``lr``; print Horovod's message after the warm-up's last epoch (``verbose`` > 0, rank 0)."""
        super().on_epoch_end(state)
        if self.verbose and state.is_root and state.epoch == self.warmup_epochs - 1:
            print(f"\nEpoch {state.epoch + 1}: finished gradual learning rate warmup to {state.ops.get_lr():g}.")


__all__ = ["BroadcastGlobalVariablesCallback", "LearningRateScheduleCallback", "LearningRateWarmupCallback",
           "MetricAverageCallback"]
