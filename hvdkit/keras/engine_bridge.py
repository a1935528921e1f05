"""Keras hooks -> hvdkit's core Engine, and the Keras callback class for any core callback.

Every hvdkit Keras callback wraps one framework-free core callback. All of them on one model share
one :class:`~hvdkit.core.engine.Engine` (kept on the model), so warm-up and schedules multiply,
checkpoints see every callback's state, and the bookkeeping (global step, LR application, metric
averaging) happens once: the first hvdkit callback in ``fit``'s list drives the engine, the others
only register their core callback. Under ``fit_elastic`` the elastic loop drives it.

:func:`keras_callback` makes the Keras class from the core class, so the two never disagree on a
constructor argument (``hvdkit.keras.callbacks`` is built this way).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import keras

from hvdkit.core.callback import Callback
from hvdkit.core.engine import Engine
from hvdkit.keras.mixed_precision import check_loss_scaling
from hvdkit.keras.ops import KerasOps
from hvdkit.tensorflow.comm import HorovodComm

_ENGINE_ATTR = "_hvdkit_engine"
#: The ``logs`` argument of Keras callback hooks.
KerasLogs = dict[str, Any] | None


def engine_for(model: keras.Model) -> Engine:
    """The engine shared by hvdkit callbacks on ``model`` (created on first use)."""
    engine = getattr(model, _ENGINE_ATTR, None)
    if engine is None:
        engine = Engine(HorovodComm(), KerasOps(model), [])
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


class EngineBridge(keras.callbacks.Callback):
    """A Keras callback that runs one core callback on the model's shared engine.

    Attribute reads that the Keras class does not answer go to the core callback (``checkpoint.restored``
    works as with ``hvdkit.callbacks.Checkpoint``).

    ``async_safe``: declares that Keras may run ``on_train_batch_end`` on worker threads instead of
    waiting for every step (Keras 3.15's TensorFlow backend calls the hooks synchronously anyway; the
    bridge costs 16-30 us per step, measured in docs/benchmarks.md, "Keras model.fit vs the tape loop").
    So the step counter is set in ``on_train_batch_begin`` (which Keras always calls synchronously) from
    the epoch's first step plus Keras's batch index, and batch-end hooks never move it.
    """

    async_safe = True

    def __init__(self, core: Callback | None = None) -> None:
        super().__init__()
        self.core = core
        self._engine: Engine | None = None
        self._epoch_base = 0
        self._batches = 0

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
        engine.driver = self
        try:
            check_loss_scaling(self.model)
            engine.train_begin(int(self.params.get("epochs") or 0), steps_per_epoch=self.params.get("steps"))
        except BaseException:
            engine.driver = None
            engine.dispatcher.callbacks.clear()
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
        self.engine.epoch_begin(epoch)

    def on_train_batch_begin(self, batch: int, logs: KerasLogs = None) -> None:
        """Set the step counters from Keras's batch index and begin the engine's batch."""
        if self._driving:
            self._batches = batch + 1
            self.engine.batch_begin(batch, global_step=self._epoch_base + batch)

    def on_train_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        """End the engine's batch (counters untouched: this may run late, on another thread)."""
        if self._driving:
            self.engine.batch_end(logs, advance=False)
            if self.engine.state.stop_training:
                self.model.stop_training = True

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

    def on_train_end(self, logs: KerasLogs = None) -> None:
        """End the engine's run."""
        if self._driving:
            self._abort()

    def _abort(self) -> None:
        """End the run: ``on_train_end`` for the core callbacks, and the engine free for the next ``fit``."""
        try:
            self.engine.train_end()
        finally:
            self.engine.driver = None
            # The next fit registers the callbacks it is given; the state carries over.
            self.engine.dispatcher.callbacks.clear()


def keras_callback(core_cls: type[Callback], doc: str | None = None) -> type[EngineBridge]:
    """The Keras callback class for the core callback class ``core_cls``.

    It takes the same constructor arguments (``inspect.signature`` shows them) and offers the same
    classmethod constructors (``LearningRateSchedule.cosine(...)``), each returning the Keras class.
    """
    sig = inspect.signature(core_cls)

    def __init__(self: EngineBridge, *args: Any, **kwargs: Any) -> None:
        if len(args) == 1 and not kwargs and isinstance(args[0], core_cls):
            core = args[0]  # an instance a classmethod constructor built
        else:
            core = core_cls(*args, **kwargs)
        EngineBridge.__init__(self, core)

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    __init__.__signature__ = sig.replace(parameters=[self_param, *sig.parameters.values()])  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {
        "__init__": __init__,
        "__module__": "hvdkit.keras.callbacks",
        "__qualname__": core_cls.__name__,
        "__doc__": (doc or f"Keras ``model.fit`` callback running hvdkit's core "
                    f":class:`{core_cls.__module__}.{core_cls.__name__}`.") + "\n\n" + (core_cls.__doc__ or ""),
        "core_class": core_cls,
    }
    for name, attr in vars(core_cls).items():
        if isinstance(attr, classmethod) and not name.startswith("_"):
            namespace[name] = classmethod(_forwarding(core_cls, name))
    return type(core_cls.__name__, (EngineBridge,), namespace)


def _forwarding(core_cls: type[Callback], name: str) -> Any:
    target = getattr(core_cls, name)

    @functools.wraps(target)
    def build(cls: type[EngineBridge], *args: Any, **kwargs: Any) -> EngineBridge:
        return cls(target(*args, **kwargs))

    return build
