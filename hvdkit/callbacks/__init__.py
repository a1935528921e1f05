"""Callbacks shared by every hvdkit adapter (framework-free).

Use them as they are with the PyTorch ``Trainer`` (or an ``Engine`` in a hand-written loop); for
Keras ``model.fit``, ``hvdkit.keras.callbacks`` has the same classes as Keras callbacks.
"""

from hvdkit.callbacks.broadcast_initial_state import BroadcastInitialState
from hvdkit.callbacks.checkpoint import Checkpoint
from hvdkit.callbacks.lr import LearningRateSchedule, LearningRateWarmup
from hvdkit.callbacks.metric_average import MetricAverage
from hvdkit.callbacks.metrics_logger import MetricsLogger
from hvdkit.callbacks.progress import ProgressBar
from hvdkit.callbacks.step_timing import StepTiming
from hvdkit.callbacks.tensorboard import TensorBoard

__all__ = ["BroadcastInitialState", "Checkpoint", "LearningRateSchedule", "LearningRateWarmup", "MetricAverage",
           "MetricsLogger", "ProgressBar", "StepTiming", "TensorBoard"]
