"""Callbacks shared by every hvdkit adapter (framework-free)."""

from hvdkit.callbacks.checkpoint import Checkpoint
from hvdkit.callbacks.lr_schedule import LearningRateSchedule
from hvdkit.callbacks.lr_warmup import LearningRateWarmup
from hvdkit.callbacks.metric_average import MetricAverage
from hvdkit.callbacks.metrics_logger import MetricsLogger
from hvdkit.callbacks.progress import ProgressBar

__all__ = ["Checkpoint", "LearningRateSchedule", "LearningRateWarmup", "MetricAverage", "MetricsLogger",
           "ProgressBar"]
