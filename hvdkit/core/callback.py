"""The callback base class: one method per :class:`~hvdkit.core.events.Event`, plus ``close``."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from hvdkit.core.events import Event

if TYPE_CHECKING:
    from hvdkit.core.state import TrainState

_HOOKS = tuple(e.method_name for e in Event)
# Other libraries' names for hvdkit's events: Keras's (hvdkit.keras.callbacks serve those) and Lightning's.
_ELSEWHERE = {
    "on_train_batch_begin": "on_batch_begin", "on_train_batch_end": "on_batch_end",
    "on_train_batch_start": "on_batch_begin", "on_train_epoch_start": "on_epoch_begin",
    "on_train_epoch_end": "on_epoch_end", "on_train_start": "on_train_begin", "on_fit_start": "on_train_begin",
    "on_fit_end": "on_train_end", "on_test_begin": "on_eval_begin", "on_test_end": "on_eval_end",
    "on_validation_start": "on_eval_begin", "on_validation_end": "on_eval_end",
    "on_save_checkpoint": "on_checkpoint_saved", "on_load_checkpoint": "on_checkpoint_restored",
}


def _stray_hook(cls: type, name: str) -> TypeError:
    """The error for an ``on_*`` method no event calls: it would silently never run."""
    meant = _ELSEWHERE.get(name) or next(iter(difflib.get_close_matches(name, _HOOKS, n=1, cutoff=0.8)), None)
    hint = f"override {meant} instead" if meant else "rename it if it is a helper, or override one of the events"
    return TypeError(f"{cls.__qualname__}.{name} is not an hvdkit event, so it would never be called: {hint}. "
                     f"The events are {', '.join(_HOOKS)}")


class Callback:
    """Base class for hvdkit callbacks; override the ``on_*`` methods you need.

    :meth:`run_event` is the one dispatch method and is final (as in Composer): a subclass that overrides
    it is a TypeError when the class is created. Override the ``on_*`` hooks instead; an ``on_*`` method
    that is no event (Keras's ``on_train_batch_end``, a typo) is a TypeError too, naming the event meant.
    The engine calls only the hooks a class overrides (:meth:`overrides`), so an unused hook costs nothing
    per step.

    ``order`` decides the position among callbacks (lower runs first): checkpoint
    restore must run before callbacks that read the restored state, loggers after
    everything that changes the logs.
    ``state_dict``/``load_state_dict`` carry whatever the callback must remember
    across a checkpoint resume or an elastic reset.

    ``on_train_end`` is a training event (the run is over: flush, write a summary); :meth:`close` is
    cleanup (release files and threads). The engine calls ``close`` after ``on_train_end``, in a
    ``finally``, so it runs even when training or another callback raised. A callback may be used for
    another run after ``close`` (Keras calls ``fit`` again): reopen what it needs in ``on_train_begin``.
    """

    order: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run_event" in vars(cls):
            raise TypeError(f"{cls.__qualname__} overrides Callback.run_event, which is final: override the "
                            "on_* hook of the event instead (e.g. on_batch_end)")
        for name, value in vars(cls).items():
            if name.startswith("on_") and callable(value) and name not in _HOOKS:
                raise _stray_hook(cls, name)

    @classmethod
    def overrides(cls, event: Event) -> bool:
        """True when this class overrides the hook of ``event`` (the base class's hooks do nothing)."""
        return getattr(cls, event.method_name) is not getattr(Callback, event.method_name)

    def bind(self, engine: Any) -> None:
        """Called once by the engine that will fire this callback's events."""

    def run_event(self, event: Event, state: TrainState) -> None:
        """Call this callback's hook for ``event`` (final: override the hooks, not this)."""
        getattr(self, event.method_name)(state)

    def close(self) -> None:
        """Release files and threads; called after every run, even one that raised."""

    def on_train_begin(self, state: TrainState) -> None:
        """See :attr:`Event.TRAIN_BEGIN <hvdkit.core.events.Event.TRAIN_BEGIN>`."""

    def on_epoch_begin(self, state: TrainState) -> None:
        """See :attr:`Event.EPOCH_BEGIN <hvdkit.core.events.Event.EPOCH_BEGIN>`."""

    def on_batch_begin(self, state: TrainState) -> None:
        """See :attr:`Event.BATCH_BEGIN <hvdkit.core.events.Event.BATCH_BEGIN>`."""

    def on_batch_end(self, state: TrainState) -> None:
        """See :attr:`Event.BATCH_END <hvdkit.core.events.Event.BATCH_END>`."""

    def on_eval_begin(self, state: TrainState) -> None:
        """See :attr:`Event.EVAL_BEGIN <hvdkit.core.events.Event.EVAL_BEGIN>`."""

    def on_eval_end(self, state: TrainState) -> None:
        """See :attr:`Event.EVAL_END <hvdkit.core.events.Event.EVAL_END>` (``state.logs`` has ``val_*``)."""

    def on_epoch_end(self, state: TrainState) -> None:
        """See :attr:`Event.EPOCH_END <hvdkit.core.events.Event.EPOCH_END>`."""

    def on_epoch_save(self, state: TrainState) -> None:
        """See :attr:`Event.EPOCH_SAVE <hvdkit.core.events.Event.EPOCH_SAVE>`."""

    def on_train_end(self, state: TrainState) -> None:
        """See :attr:`Event.TRAIN_END <hvdkit.core.events.Event.TRAIN_END>` (also after an error)."""

    def on_checkpoint_saved(self, state: TrainState) -> None:
        """See :attr:`Event.CHECKPOINT_SAVED <hvdkit.core.events.Event.CHECKPOINT_SAVED>`."""

    def on_checkpoint_restored(self, state: TrainState) -> None:
        """See :attr:`Event.CHECKPOINT_RESTORED <hvdkit.core.events.Event.CHECKPOINT_RESTORED>`."""

    def on_commit(self, state: TrainState) -> None:
        """See :attr:`Event.COMMIT <hvdkit.core.events.Event.COMMIT>`."""

    def on_reset(self, state: TrainState) -> None:
        """See :attr:`Event.RESET <hvdkit.core.events.Event.RESET>`."""

    def set_model(self, model: object) -> None:
        """Keras calls this on the callbacks given to ``model.fit``: a core callback there is a mistake."""
        name = type(self).__name__
        raise TypeError(f"{name} from hvdkit.callbacks is a framework-free callback for the PyTorch Trainer and "
                        f"hand-written loops; for Keras model.fit use hvdkit.keras.callbacks.{name}")

    def state_dict(self) -> dict[str, Any]:
        """What this callback must remember across a resume or an elastic reset."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
