"""The callback base class: one method per :class:`~hvdkit.core.events.Event`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hvdkit.core.events import Event

if TYPE_CHECKING:
    from hvdkit.core.state import TrainState


class Callback:
    """Base class for hvdkit callbacks; override the ``on_*`` methods you need.

    ``order`` decides the position among callbacks (lower runs first): checkpoint
    restore must run before callbacks that read the restored state, loggers after
    everything that changes the logs.
    ``state_dict``/``load_state_dict`` carry whatever the callback must remember
    across a checkpoint resume or an elastic reset.
    """

    order: int = 0

    def bind(self, engine: Any) -> None:
        """Called once by the engine that will fire this callback's events."""

    def run_event(self, event: Event, state: TrainState) -> None:
        """Call this callback's hook for ``event``."""
        getattr(self, event.method_name)(state)

    def on_train_begin(self, state: TrainState) -> None:
        """Training starts (a checkpoint may be restored here)."""

    def on_epoch_begin(self, state: TrainState) -> None:
        """An epoch starts (``state.epoch``)."""

    def on_batch_begin(self, state: TrainState) -> None:
        """A training step starts; LR callbacks set their factors here."""

    def on_batch_end(self, state: TrainState) -> None:
        """A training step ended; ``state.logs`` holds its logs."""

    def on_epoch_end(self, state: TrainState) -> None:
        """An epoch ended; ``state.logs`` holds its logs (averaging callbacks may rewrite them)."""

    def on_train_end(self, state: TrainState) -> None:
        """Training ended (also after an error)."""

    def on_epoch_save(self, state: TrainState) -> None:
        """After ``on_epoch_end``, with the final logs and ``state.epoch`` counting the finished epoch."""

    def on_checkpoint_saved(self, state: TrainState) -> None:
        """A checkpoint was written."""

    def on_checkpoint_restored(self, state: TrainState) -> None:
        """A checkpoint was restored."""

    def on_commit(self, state: TrainState) -> None:
        """Elastic training committed its state."""

    def on_reset(self, state: TrainState) -> None:
        """Elastic training reset after workers left or joined (``state.comm.size`` is the new size)."""

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
