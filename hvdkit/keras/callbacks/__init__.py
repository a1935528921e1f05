"""hvdkit's callbacks for Keras 3 ``model.fit``; each delegates to the shared core callback.

    from hvdkit.keras.callbacks import (BroadcastInitialState, Checkpoint, LearningRateSchedule,
                                        LearningRateWarmup, MetricAverage, MetricsLogger, ProgressBar)
"""

from hvdkit.keras.callbacks.broadcast_initial_state import BroadcastInitialState
from hvdkit.keras.callbacks.checkpoint import Checkpoint
from hvdkit.keras.callbacks.lr_schedule import LearningRateSchedule
from hvdkit.keras.callbacks.lr_warmup import LearningRateWarmup
from hvdkit.keras.callbacks.metric_average import MetricAverage
from hvdkit.keras.callbacks.metrics_logger import MetricsLogger
from hvdkit.keras.callbacks.progress import ProgressBar

__all__ = ["BroadcastInitialState", "Checkpoint", "LearningRateSchedule", "LearningRateWarmup", "MetricAverage",
           "MetricsLogger", "ProgressBar"]
