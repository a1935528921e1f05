"""hvdkit's callbacks for Keras 3 ``model.fit``: the classes of ``hvdkit.callbacks``, as Keras callbacks.

    from hvdkit.keras.callbacks import (BroadcastInitialState, Checkpoint, LearningRateSchedule,
                                        LearningRateWarmup, MetricAverage, MetricsLogger, ProgressBar,
                                        TensorBoard)

Each is a subclass of :class:`~hvdkit.keras.engine_bridge.EngineBridge` with the core class's constructor
(a test checks they agree); ``Checkpoint`` adds ``resume_epoch`` and ``ProgressBar`` replaces Keras's own
progress bar. ``__all__`` lists hvdkit's names only.

Horovod's ``hvd.callbacks`` names (``BroadcastGlobalVariablesCallback``, ``MetricAverageCallback``,
``LearningRateWarmupCallback``, ``LearningRateScheduleCallback``, ``BestModelCheckpoint``) live in the compat
module :mod:`hvdkit.keras.horovod_callbacks`; this package answers them too (``__horovod_all__``), so
``import hvdkit.keras as hvd; hvd.callbacks.X`` works as with Horovod.
"""

from hvdkit.horovod_names import serve as _serve
from hvdkit.keras import horovod_callbacks as _horovod_callbacks
from hvdkit.keras.callbacks.broadcast_initial_state import BroadcastInitialState
from hvdkit.keras.callbacks.checkpoint import Checkpoint
from hvdkit.keras.callbacks.lr_schedule import LearningRateSchedule
from hvdkit.keras.callbacks.lr_warmup import LearningRateWarmup
from hvdkit.keras.callbacks.metric_average import MetricAverage
from hvdkit.keras.callbacks.metrics_logger import MetricsLogger
from hvdkit.keras.callbacks.progress import ProgressBar
from hvdkit.keras.callbacks.tensorboard import TensorBoard

__getattr__ = _serve(globals(), _horovod_callbacks, "horovod.tensorflow.keras.callbacks")

__all__ = ["BroadcastInitialState", "Checkpoint", "LearningRateSchedule", "LearningRateWarmup", "MetricAverage",
           "MetricsLogger", "ProgressBar", "TensorBoard"]
