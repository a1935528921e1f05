"""Horovod 0.28.1's ``hvd.callbacks`` for Keras 3 (``import hvdkit.keras as hvd; hvd.callbacks.X``): the
compat module behind those names (``hvdkit.keras.callbacks`` answers them from here).

Horovod's own fail on Keras 3. These are :mod:`hvdkit.compat.horovod.callbacks`'s classes as Keras callbacks,
sharing one engine per model with hvdkit's own, so both kinds can be mixed in one ``fit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hvdkit.compat.horovod import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class BroadcastGlobalVariablesCallback(EngineBridge):
    """Horovod's ``BroadcastGlobalVariablesCallback`` on Keras 3: every rank starts from ``root_rank``'s model
    and optimizer variables (:class:`hvdkit.compat.horovod.callbacks.BroadcastGlobalVariablesCallback`)."""

    core_class = core.BroadcastGlobalVariablesCallback

    def __init__(self, root_rank: int, device: str = "", local_variables: Any = None) -> None:
        super().__init__(core.BroadcastGlobalVariablesCallback(root_rank, device, local_variables))


class MetricAverageCallback(EngineBridge):
    """Horovod's ``MetricAverageCallback`` on Keras 3: the epoch logs averaged over all ranks."""

    core_class = core.MetricAverageCallback

    def __init__(self, device: str = "") -> None:
        super().__init__(core.MetricAverageCallback(device))


class LearningRateWarmupCallback(EngineBridge):
    """Horovod's ``LearningRateWarmupCallback`` on Keras 3
    (:class:`hvdkit.compat.horovod.callbacks.LearningRateWarmupCallback`)."""

    core_class = core.LearningRateWarmupCallback

    def __init__(self, initial_lr: float, warmup_epochs: float = 5, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None, verbose: int = 0) -> None:
        super().__init__(core.LearningRateWarmupCallback(initial_lr, warmup_epochs, momentum_correction,
                                                         steps_per_epoch, verbose))


class LearningRateScheduleCallback(EngineBridge):
    """Horovod's ``LearningRateScheduleCallback`` on Keras 3
    (:class:`hvdkit.compat.horovod.callbacks.LearningRateScheduleCallback`)."""

    core_class = core.LearningRateScheduleCallback

    def __init__(self, initial_lr: float, multiplier: float | Callable[[float], float], start_epoch: int = 0,
                 end_epoch: int | None = None, staircase: bool = True, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None) -> None:
        super().__init__(core.LearningRateScheduleCallback(initial_lr, multiplier, start_epoch, end_epoch, staircase,
                                                           momentum_correction, steps_per_epoch))


class BestModelCheckpoint:
    """Horovod's ``BestModelCheckpoint`` is the model checkpoint of ``horovod.spark``'s KerasEstimator (which
    sets its file path); it does not exist here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "hvd.callbacks.BestModelCheckpoint belongs to horovod.spark's KerasEstimator, which hvdkit does not "
            "provide. Use keras.callbacks.ModelCheckpoint(path, save_best_only=True) on rank 0 only, or "
            "hvdkit.keras.callbacks.Checkpoint (rank 0 writes atomically; resumes).")


__horovod_all__ = ["BestModelCheckpoint", "BroadcastGlobalVariablesCallback", "LearningRateScheduleCallback",
                   "LearningRateWarmupCallback", "MetricAverageCallback"]
__all__ = __horovod_all__
