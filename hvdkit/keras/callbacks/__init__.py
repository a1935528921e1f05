"""hvdkit's callbacks for Keras 3 ``model.fit``: the classes of ``hvdkit.callbacks``, as Keras callbacks.

Each is a subclass of :class:`~hvdkit.keras.engine_bridge.EngineBridge` with the core class's constructor
(a test checks they agree); ``Checkpoint`` adds ``resume_epoch`` and ``ProgressBar`` replaces Keras's own
progress bar. ``__all__`` lists hvdkit's names only.

Horovod's ``hvd.callbacks`` names (``BroadcastGlobalVariablesCallback``, ``MetricAverageCallback``,
``LearningRateWarmupCallback``, ``LearningRateScheduleCallback``, ``BestModelCheckpoint``) live in the compat
module :mod:`hvdkit.compat.horovod.keras_callbacks`; this package answers them too (``__horovod_all__``), so
``import hvdkit.keras as hvd; hvd.callbacks.X`` works as with Horovod.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import keras

from hvdkit import callbacks as core
from hvdkit.compat.horovod import keras_callbacks as _horovod_callbacks
from hvdkit.compat.horovod import serve as _serve
from hvdkit.keras.engine_bridge import EngineBridge, KerasLogs, engine_for


class BroadcastInitialState(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.BroadcastInitialState` (same arguments):
    the root rank's model and optimizer variables go to every rank before the first step."""

    core_class = core.BroadcastInitialState
    core: core.BroadcastInitialState

    def __init__(self, root_rank: int = 0, process_set: Any = None) -> None:
        super().__init__(core.BroadcastInitialState(root_rank, process_set))


class Checkpoint(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.Checkpoint` (same arguments).

    Keras fixes the first epoch when ``fit`` starts, so resume before it::

        ckpt = Checkpoint("ckpt/")
        model.fit(x, y, epochs=10, initial_epoch=ckpt.resume_epoch(model), callbacks=[..., ckpt])

    Without ``resume_epoch``, a checkpoint found at ``fit``'s start raises a clear error before the
    first step instead of silently training the wrong epochs.
    """

    core_class = core.Checkpoint
    core: core.Checkpoint

    def __init__(self, directory: str | os.PathLike[str], every_n_epochs: int = 1, keep: int = 3,
                 resume: bool = True, trust_pickle: bool = False, async_save: bool = True,
                 process_set: Any = None, on_signal: str = "save") -> None:
        super().__init__(core.Checkpoint(directory, every_n_epochs, keep, resume, trust_pickle, async_save,
                                         process_set, on_signal))

    def resume_epoch(self, model: keras.Model) -> int:
        """Restore the newest valid checkpoint into ``model`` now; return the epoch to pass as
        ``initial_epoch`` (0 when there is none, or with ``resume=False``)."""
        if not model.built:
            raise ValueError("model must be built before resume_epoch(model): call model.build(...) or run "
                             "it on a batch first")
        engine = engine_for(model)
        engine.register(self.core)
        if self.core.resume and self.core.restored is None:
            self.core.load_latest(engine.state)
        return engine.state.epoch


class LearningRateSchedule(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.LearningRateSchedule` (same arguments
    and constructors, each returning this Keras class)."""

    core_class = core.LearningRateSchedule
    core: core.LearningRateSchedule

    def __init__(self, multiplier: Callable[[float], float], *, staircase: bool = False,
                 name: str = "function") -> None:
        super().__init__(core.LearningRateSchedule(multiplier, staircase=staircase, name=name))

    @classmethod
    def step_decay(cls, milestones: Sequence[int], gamma: float = 0.1) -> LearningRateSchedule:
        """Multiply the LR by ``gamma`` at each epoch in ``milestones``."""
        return cls.from_core(core.LearningRateSchedule.step_decay(milestones, gamma))

    @classmethod
    def cosine(cls, end_epoch: float, start_epoch: float = 0.0, min_factor: float = 0.0) -> LearningRateSchedule:
        """Cosine decay from 1 at ``start_epoch`` to ``min_factor`` at ``end_epoch`` (fractional epochs)."""
        return cls.from_core(core.LearningRateSchedule.cosine(end_epoch, start_epoch, min_factor))

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> LearningRateSchedule:
        """Build a schedule by name (``"step_decay"`` or ``"cosine"``) with that constructor's arguments."""
        return cls.from_core(core.LearningRateSchedule.from_name(name, **kwargs))


class LearningRateWarmup(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.LearningRateWarmup` (same arguments):
    the LR ramps from ``T/n`` to the optimizer's ``T`` over ``warmup_epochs`` epochs, every batch."""

    core_class = core.LearningRateWarmup
    core: core.LearningRateWarmup

    def __init__(self, warmup_epochs: float = 5, steps_per_epoch: int | None = None,
                 momentum_correction: bool = True, verbose: bool = False) -> None:
        super().__init__(core.LearningRateWarmup(warmup_epochs, steps_per_epoch, momentum_correction, verbose))


class MetricAverage(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.MetricAverage` (same arguments): the
    epoch logs (training and validation) averaged over ranks in place, so ``History`` and Keras's progress
    bar show the global values."""

    core_class = core.MetricAverage
    core: core.MetricAverage

    def __init__(self, process_set: Any = None) -> None:
        super().__init__(core.MetricAverage(process_set))


class MetricsLogger(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.MetricsLogger` (same arguments): one
    row per epoch (epoch, global step, every metric) appended to ``path``, and one every ``batch_every`` steps."""

    core_class = core.MetricsLogger
    core: core.MetricsLogger

    def __init__(self, path: str | os.PathLike[str], fmt: str | None = None, batch_every: int = 0) -> None:
        super().__init__(core.MetricsLogger(path, fmt, batch_every))


class ProgressBar(EngineBridge, keras.callbacks.ProgbarLogger):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.ProgressBar` (same arguments): one
    tqdm bar per epoch, rank 0 only. Being a ``ProgbarLogger`` too, it replaces the progress bar
    Keras would add for ``verbose=1``, on every rank; its own printing of validation and prediction
    progress is off."""

    core_class = core.ProgressBar
    core: core.ProgressBar

    def __init__(self, leave: bool = True, **tqdm_kwargs: Any) -> None:
        super().__init__(core.ProgressBar(leave, **tqdm_kwargs))

    def on_test_begin(self, logs: KerasLogs = None) -> None:
        """No validation progress bar (the engine's eval event still fires)."""
        EngineBridge.on_test_begin(self, logs)
    def on_test_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """No validation progress bar."""
    def on_test_end(self, logs: KerasLogs = None) -> None:
        """No validation progress bar (the engine's eval event still fires)."""
        EngineBridge.on_test_end(self, logs)
    def on_predict_begin(self, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
    def on_predict_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""
    def on_predict_end(self, logs: KerasLogs = None) -> None:
        """No prediction progress bar."""


class StepTiming(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.StepTiming` (same arguments): step time
    and samples per second every ``every`` steps, into the batch logs ``MetricsLogger(batch_every=...)`` and
    ``TensorBoard(batch_every=...)`` write; pass ``batch_size=`` (per rank) for samples per second. The wait
    for the gradients runs inside Keras's compiled step and is not measured, so ``comm_wait_s`` and the
    straggler hint are absent here."""

    core_class = core.StepTiming
    core: core.StepTiming

    def __init__(self, every: int = 20, batch_size: int | None = None, straggler_factor: float = 1.5,
                 straggler_steps: int = 20) -> None:
        super().__init__(core.StepTiming(every, batch_size, straggler_factor, straggler_steps))


class TensorBoard(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.TensorBoard` (same arguments):
    hvdkit's scalars from rank 0 (not Keras's own callback, which every rank would run); pass
    ``batch_size=`` (per rank) for samples per second."""

    core_class = core.TensorBoard
    core: core.TensorBoard

    def __init__(self, log_dir: str | os.PathLike[str], batch_every: int = 10, batch_size: int | None = None,
                 flush_secs: int = 30) -> None:
        super().__init__(core.TensorBoard(log_dir, batch_every, batch_size, flush_secs))


__getattr__ = _serve(globals(), _horovod_callbacks, "horovod.tensorflow.keras.callbacks")

__all__ = ["BroadcastInitialState", "Checkpoint", "LearningRateSchedule", "LearningRateWarmup", "MetricAverage",
           "MetricsLogger", "ProgressBar", "StepTiming", "TensorBoard"]
