"""Horovod 0.28.1's ``hvd.callbacks`` for Keras 3 (``import hvdkit.keras as hvd; hvd.callbacks.X``).

Horovod's own Keras callbacks fail on Keras 3 (``keras.backend.get_value`` is gone, optimizer
wrapping breaks with ``'Variable' object has no attribute 'ref'``). These are hvdkit's core callbacks
with Horovod's constructors (:mod:`hvdkit.callbacks.horovod_compat`), made Keras callbacks by
:func:`~hvdkit.keras.engine_bridge.keras_callback`: they share one engine per model with hvdkit's own
Keras callbacks, so Horovod's and hvdkit's callbacks can be mixed in one ``fit``.
"""

from __future__ import annotations

from typing import Any

from hvdkit.callbacks import horovod_compat as core
from hvdkit.keras.engine_bridge import keras_callback

BroadcastGlobalVariablesCallback = keras_callback(
    core.BroadcastGlobalVariablesCallback, "Horovod's ``BroadcastGlobalVariablesCallback`` on Keras 3.")
MetricAverageCallback = keras_callback(core.MetricAverageCallback, "Horovod's ``MetricAverageCallback`` on Keras 3.")
LearningRateWarmupCallback = keras_callback(
    core.LearningRateWarmupCallback, "Horovod's ``LearningRateWarmupCallback`` on Keras 3.")
LearningRateScheduleCallback = keras_callback(
    core.LearningRateScheduleCallback, "Horovod's ``LearningRateScheduleCallback`` on Keras 3.")


class BestModelCheckpoint:
    """Horovod's ``BestModelCheckpoint`` is the model checkpoint of ``horovod.spark``'s KerasEstimator (which
    sets its file path); it does not exist here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "hvd.callbacks.BestModelCheckpoint belongs to horovod.spark's KerasEstimator, which hvdkit does not "
            "provide. Use keras.callbacks.ModelCheckpoint(path, save_best_only=True) on rank 0 only, or "
            "hvdkit.keras.callbacks.Checkpoint (rank 0 writes atomically; resumes).")


for _cls in (BroadcastGlobalVariablesCallback, MetricAverageCallback, LearningRateWarmupCallback,
             LearningRateScheduleCallback):
    _cls.__module__ = __name__

__horovod_all__ = ["BestModelCheckpoint", "BroadcastGlobalVariablesCallback", "LearningRateScheduleCallback",
                   "LearningRateWarmupCallback", "MetricAverageCallback"]
__all__ = __horovod_all__
