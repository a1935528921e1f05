"""hvdkit's callbacks for Keras 3 ``model.fit``: the classes of ``hvdkit.callbacks``, as Keras callbacks.

    from hvdkit.keras.callbacks import (BroadcastInitialState, Checkpoint, LearningRateSchedule,
                                        LearningRateWarmup, MetricAverage, MetricsLogger, ProgressBar,
                                        TensorBoard)

Each is made from the core class by :func:`~hvdkit.keras.engine_bridge.keras_callback` (same
constructor, same classmethods); ``Checkpoint`` adds ``resume_epoch`` and ``ProgressBar`` replaces
Keras's own progress bar.

Horovod's ``hvd.callbacks`` names (``BroadcastGlobalVariablesCallback``, ``MetricAverageCallback``,
``LearningRateWarmupCallback``, ``LearningRateScheduleCallback``; ``__horovod_all__``) are here too, from
:mod:`hvdkit.keras.horovod_callbacks`, so ``import hvdkit.keras as hvd; hvd.callbacks.X`` works.
"""

from hvdkit import callbacks as core
from hvdkit.keras import horovod_callbacks as _horovod
from hvdkit.keras.callbacks.checkpoint import Checkpoint
from hvdkit.keras.callbacks.progress import ProgressBar
from hvdkit.keras.engine_bridge import keras_callback

BroadcastInitialState = keras_callback(core.BroadcastInitialState)
LearningRateSchedule = keras_callback(core.LearningRateSchedule)
LearningRateWarmup = keras_callback(core.LearningRateWarmup)
MetricAverage = keras_callback(
    core.MetricAverage, "Averages the epoch logs (training and validation metrics) over ranks in place, so "
    "``History`` and Keras's progress bar show the global values.")
MetricsLogger = keras_callback(core.MetricsLogger)
TensorBoard = keras_callback(
    core.TensorBoard, "hvdkit's TensorBoard scalars from rank 0 (not Keras's own callback, which every rank "
    "would run); pass batch_size= (per rank) for samples per second.")

__all__ = ["BroadcastInitialState", "Checkpoint", "LearningRateSchedule", "LearningRateWarmup", "MetricAverage",
           "MetricsLogger", "ProgressBar", "TensorBoard"]

globals().update({_n: getattr(_horovod, _n) for _n in _horovod.__horovod_all__})
__horovod_all__ = list(_horovod.__horovod_all__)
