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
        getattr(self, event.method_name)(state)

    def on_train_begin(self, state: TrainState) -> None: ...
    def on_epoch_begin(self, state: TrainState) -> None: ...
    def on_batch_begin(self, state: TrainState) -> None: ...
    def on_batch_end(self, state: TrainState) -> None: ...
    def on_epoch_end(self, state: TrainState) -> None: ...
    def on_train_end(self, state: TrainState) -> None: ...
    def on_epoch_save(self, state: TrainState) -> None: ...
    def on_checkpoint_saved(self, state: TrainState) -> None: ...
    def on_checkpoint_restored(self, state: TrainState) -> None: ...
    def on_commit(self, state: TrainState) -> None: ...
    def on_reset(self, state: TrainState) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
