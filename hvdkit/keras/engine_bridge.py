"""Keras hooks -> hvdkit's core Engine, and the Keras callback class for any core callback.

hvdkit's Keras callbacks on one model share one :class:`~hvdkit.core.engine.Engine` (kept on the model):
the first in ``fit``'s list drives it, the others only register their core callback (under
``fit_elastic`` the elastic loop drives it). Validation inside ``fit`` fires ``EVAL_BEGIN``/``EVAL_END``.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import keras

from hvdkit.core.callback import Callback
from hvdkit.core.engine import Engine
from hvdkit.core.hang_report import heartbeat
from hvdkit.keras import stop_training
from hvdkit.keras.backend import current as backend
from hvdkit.keras.mixed_precision import check_loss_scaling
from hvdkit.keras.ops import KerasOps

_ENGINE_ATTR = "_hvdkit_engine"
#: The ``logs`` argument of Keras callback hooks.
KerasLogs = dict[str, Any] | None
_Bridge = TypeVar("_Bridge", bound="EngineBridge")


def engine_for(model: keras.Model) -> Engine:
    """The engine shared by hvdkit callbacks on ``model`` (created on first use)."""
    engine = getattr(model, _ENGINE_ATTR, None)
    if engine is None:
        engine = Engine(backend.HorovodComm(), KerasOps(model), [])
        object.__setattr__(model, _ENGINE_ATTR, engine)  # bypass Keras's attribute tracking
    return engine


def _scalar(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def scalar_logs(logs: KerasLogs) -> dict[str, float]:
    """The entries of Keras ``logs`` that are numbers."""
    return {k: s for k, v in (logs or {}).items() if (s := _scalar(v)) is not None}


def val_logs(logs: KerasLogs) -> dict[str, float]:
    """Keras's evaluation ``logs`` named as in the epoch logs (``loss`` -> ``val_loss``)."""
    return {k if k.startswith("val_") else f"val_{k}": v for k, v in scalar_logs(logs).items()}


class EngineBridge(keras.callbacks.Callback):
    """A Keras callback that runs one core callback on the model's shared engine.

    Attribute reads that the Keras class does not answer go to the core callback (``checkpoint.restored``
    works as with ``hvdkit.callbacks.Checkpoint``).

    ``async_safe``: Keras may run ``on_train_batch_end`` on worker threads, so the step counter is set in
    ``on_train_batch_begin`` (always synchronous) from the epoch's first step plus Keras's batch index,
    and batch-end hooks never move it.
    """

    async_safe = True
    #: The core callback class a subclass wraps.
    core_class: ClassVar[type[Callback] | None] = None

    def __init__(self, core: Callback | None = None) -> None:
        super().__init__()
        self.core = core
        self._engine: Engine | None = None
        self._epoch_base = 0
        self._batches = 0

    @classmethod
    def from_core(cls: type[_Bridge], core: Callback) -> _Bridge:
        """This Keras class around an already built core callback (what its classmethod constructors use)."""
        if cls.core_class is not None and not isinstance(core, cls.core_class):
            raise TypeError(f"{cls.__name__} wraps a {cls.core_class.__name__}, got {type(core).__name__}")
        bridge = cls.__new__(cls)
        EngineBridge.__init__(bridge, core)
        return bridge

    def __getattr__(self, name: str) -> Any:
        core = self.__dict__.get("core")
        if core is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(core, name)

    def set_model(self, model: keras.Model) -> None:
        """Attach to ``model``'s engine and register the core callback."""
        super().set_model(model)
        self._engine = engine_for(model)
        if self.core is not None:
            self._engine.register(self.core)

    @property
    def engine(self) -> Engine:
        """The model's engine (once ``fit`` or ``set_model`` attached this callback)."""
        if self._engine is None:
            raise RuntimeError(f"{type(self).__name__} is not attached to a model yet (pass it to model.fit)")
        return self._engine

    @property
    def _driving(self) -> bool:
        return self._engine is not None and self._engine.driver is self

    # -- Keras hooks ---------------------------------------------------------------
    def on_train_begin(self, logs: KerasLogs = None) -> None:
        """The first hvdkit callback of ``fit`` starts the engine's run and drives it."""
        engine = self.engine
        if engine.driver is not None:
            return
        if self.params.get("steps") is None:  # Keras's "unknown or infinite" (tf.data cardinality < 0)
            raise ValueError(
                "model.fit needs steps_per_epoch here: the training data has no known length (a tf.data.Dataset "
                "that repeat()s forever, or one of unknown cardinality, e.g. after filter()), so epoch 0 would never "
                "end, or the ranks would run different numbers of steps and wait for each other. Pass "
                "steps_per_epoch=<steps per rank> to model.fit")
        engine.driver = self
        try:
            check_loss_scaling(self.model)
            engine.train_begin(int(self.params.get("epochs") or 0), steps_per_epoch=self.params.get("steps"))
            if not engine.state.elastic:
                stop_training.agree(self.model, engine.state.comm)  # one rank's stop stops all
        except BaseException:
            engine.driver = None
            engine.dispatcher.clear()
            raise

    def on_epoch_begin(self, epoch: int, logs: KerasLogs = None) -> None:
        """Start the engine's epoch (an epoch that contradicts a restored checkpoint is an error)."""
        if not self._driving:
            return
        state = self.engine.state
        if epoch != state.epoch:
            resumed = state.resumed_epoch
            if resumed is not None:
                self._abort()  # before any step: nothing trained, no checkpoint overwritten
                raise ValueError(
                    f"model.fit started at epoch {epoch} but training resumed from a checkpoint at epoch "
                    f"{resumed}: pass initial_epoch=checkpoint.resume_epoch(model) to model.fit")
            steps = state.steps_per_epoch or 0
            state.global_step += (epoch - state.epoch) * steps  # fit(initial_epoch=...) without a checkpoint
        self._epoch_base, self._batches = state.global_step, 0
        if epoch == state.resumed_epoch and isinstance(state.ops, KerasOps):  # draw what the checkpointed run drew
            state.ops.resume_rng()
        self.engine.epoch_begin(epoch)

    def on_train_batch_begin(self, batch: int, logs: KerasLogs = None) -> None:
        """Set the step counters from Keras's batch index and begin the engine's batch."""
        if self._driving:
            # Under steps_per_execution=k Keras calls batch hooks once per k steps, with the first step's index.
            per_call = max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))
            steps = self.params.get("steps")
            self._batches = batch + per_call if steps is None else min(batch + per_call, int(steps))
            self.engine.batch_begin(batch, global_step=self._epoch_base + batch)
            # Armed here too, on fit's thread: where Keras runs batch-end hooks on worker threads (the torch
            # backend), the arm in on_train_batch_end may come after fit's read on some ranks only.
            stop_training.arm(self.model)

    def on_train_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """End the engine's batch (counters untouched: this may run late, on another thread)."""
        if self._driving:
            self.engine.batch_end(logs, advance=False)
            if self.engine.state.stop_training:
                self.model.stop_training = True
            stop_training.arm(self.model)

    def on_epoch_end(self, epoch: int, logs: KerasLogs = None) -> None:
        """End the engine's epoch and write the (averaged) logs back into Keras's."""
        if not self._driving:
            return
        self.engine.state.global_step = self._epoch_base + self._batches  # Keras flushed batch-end hooks
        new = self.engine.epoch_end(scalar_logs(logs))
        if logs is not None:
            logs.update(new)  # in place: History and the progress bar come later in the list
        if self.engine.state.stop_training:
            self.model.stop_training = True
        stop_training.arm(self.model)

    def on_test_begin(self, logs: KerasLogs = None) -> None:
        """Validation inside ``fit`` begins: the engine's ``EVAL_BEGIN``."""
        if self._driving:
            self.engine.eval_begin()

    def on_test_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """A validation batch is progress for the hang report (validation runs no collective until its end)."""
        if self._driving:
            heartbeat(thread=False)

    def on_test_end(self, logs: KerasLogs = None) -> None:
        """Validation inside ``fit`` ended: its logs (as ``val_*``) and the engine's ``EVAL_END``."""
        if self._driving:
            self.engine.eval_end(val_logs(logs))

    def on_train_end(self, logs: KerasLogs = None) -> None:
        """End the engine's run."""
        if self._driving:
            self._abort()

    def _abort(self) -> None:
        """End the run: ``on_train_end`` for the core callbacks, and the engine free for the next ``fit``."""
        try:
            self.engine.train_end()
        finally:
            stop_training.release(self.model)
            self.engine.driver = None
            # The next fit registers the callbacks it is given; the state carries over.
            self.engine.dispatcher.clear()

