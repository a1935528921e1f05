"""Keras hooks -> hvdkit's core Engine.

Every hvdkit Keras callback wraps one framework-free core callback. All of them on
one model share one :class:`~hvdkit.core.engine.Engine` (kept on the model), so
warm-up and schedules multiply, checkpoints see every callback's state, and the
bookkeeping (global step, LR application, metric averaging) happens once: the
first hvdkit callback in ``fit``'s list drives the engine, the others only
register their core callback.
"""

from __future__ import annotations

from typing import Any

import keras

from hvdkit.core.callback import Callback
from hvdkit.core.engine import Engine
from hvdkit.keras.ops import KerasOps
from hvdkit.tensorflow.comm import HorovodComm

_ENGINE_ATTR = "_hvdkit_engine"


def engine_for(model: keras.Model) -> Engine:
    """The engine shared by hvdkit callbacks on ``model`` (created on first use)."""
    engine = getattr(model, _ENGINE_ATTR, None)
    if engine is None:
        engine = Engine(HorovodComm(), KerasOps(model), [])
        engine.driver = None  # type: ignore[attr-defined]
        object.__setattr__(model, _ENGINE_ATTR, engine)  # bypass Keras's attribute tracking
    return engine


def _register(engine: Engine, core: Callback) -> None:
    disp = engine.dispatcher
    if not any(cb is core for cb in disp.callbacks):
        disp.callbacks.append(core)
        disp.callbacks.sort(key=lambda cb: cb.order)
        core.bind(engine)


def _scalar(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class EngineBridge(keras.callbacks.Callback):
    """Base class of hvdkit's Keras callbacks.

    ``async_safe``: Keras may then run ``on_train_batch_end`` on a worker thread instead of
    waiting for every step to finish (a callback that overrides batch-end hooks otherwise forces
    a device sync per step: 80.8 vs 45.5 ms/step in docs/benchmarks.md). So the step counter is
    set in ``on_train_batch_begin`` (which Keras calls synchronously) from the epoch's first step
    plus Keras's batch index, and batch-end hooks never move it.
    """

    async_safe = True

    def __init__(self, core: Callback | None = None) -> None:
        super().__init__()
        self.core = core
        self._engine: Engine | None = None
        self._epoch_base = 0
        self._batches = 0

    def set_model(self, model: keras.Model) -> None:
        super().set_model(model)
        self._engine = engine_for(model)
        if self.core is not None:
            _register(self._engine, self.core)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError(f"{type(self).__name__} is not attached to a model yet (pass it to model.fit)")
        return self._engine

    @property
    def _driving(self) -> bool:
        return getattr(self._engine, "driver", None) is self

    # -- Keras hooks ---------------------------------------------------------------
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        engine = self.engine
        if engine.driver is not None:  # type: ignore[attr-defined]
            return
        engine.driver = self  # type: ignore[attr-defined]
        engine.train_begin(int(self.params.get("epochs") or 0), steps_per_epoch=self.params.get("steps"))

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if not self._driving:
            return
        state = self.engine.state
        if epoch != state.epoch:
            restored = state.extra.get("restored_epoch")
            if restored is not None:
                raise ValueError(
                    f"model.fit started at epoch {epoch} but training resumed from a checkpoint at epoch "
                    f"{restored}: pass initial_epoch=checkpoint.resume_epoch(model) to model.fit")
            steps = state.steps_per_epoch or 0
            state.global_step += (epoch - state.epoch) * steps  # fit(initial_epoch=...) without a checkpoint
        self._epoch_base, self._batches = state.global_step, 0
        self.engine.epoch_begin(epoch)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._driving:
            self._batches = batch + 1
            self.engine.batch_begin(batch, global_step=self._epoch_base + batch)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._driving:
            self.engine.batch_end(logs, advance=False)
            if self.engine.state.stop_training:
                self.model.stop_training = True

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if not self._driving:
            return
        self.engine.state.global_step = self._epoch_base + self._batches  # Keras flushed batch-end hooks
        plain = {k: s for k, v in (logs or {}).items() if (s := _scalar(v)) is not None}
        new = self.engine.epoch_end(plain)
        if logs is not None:
            logs.update(new)  # in place: History and the progress bar come later in the list
        if self.engine.state.stop_training:
            self.model.stop_training = True

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if not self._driving:
            return
        self.engine.train_end()
        self.engine.driver = None  # type: ignore[attr-defined]
        # The next fit registers the callbacks it is given; the state carries over.
        self.engine.dispatcher.callbacks.clear()
