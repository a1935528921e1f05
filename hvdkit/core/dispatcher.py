"""One dispatcher that runs every callback for an event, in a stable order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hvdkit.core.callback import Callback
from hvdkit.core.events import Event

if TYPE_CHECKING:
    from hvdkit.core.state import TrainState


class Dispatcher:
    """Holds the callbacks of one training run and fires events at them."""

    def __init__(self, callbacks: Iterable[Callback] = ()) -> None:
        callbacks = list(callbacks)
        for i, cb in enumerate(callbacks):
            if not isinstance(cb, Callback):
                raise TypeError(
                    f"callbacks[{i}] must be an hvdkit.core.Callback, got {type(cb).__name__} ({cb!r})"
                )
        # sorted() is stable: equal orders keep the user's order.
        self.callbacks: list[Callback] = sorted(callbacks, key=lambda cb: cb.order)

    def fire(self, event: Event, state: TrainState) -> None:
        """Run every callback's hook for ``event``, in order."""
        for cb in self.callbacks:
            cb.run_event(event, state)

    def _keys(self) -> list[str]:
        seen: dict[str, int] = {}
        keys = []
        for cb in self.callbacks:
            name = type(cb).__name__
            keys.append(f"{name}#{seen.get(name, 0)}")
            seen[name] = seen.get(name, 0) + 1
        return keys

    def state_dict(self) -> dict[str, Any]:
        """Every callback's state, keyed by class name and occurrence."""
        return {key: cb.state_dict() for key, cb in zip(self._keys(), self.callbacks)}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        """Give each callback its saved state (unknown keys are ignored)."""
        for key, cb in zip(self._keys(), self.callbacks):
            if key in states:
                cb.load_state_dict(states[key])
