"""One dispatcher that runs every callback for an event, in a stable order. The per-event lists are built
when the callbacks change (as Keras's ``CallbackList``): a step costs nothing for hooks nobody overrides."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hvdkit.core.callback import Callback
from hvdkit.core.events import Event

if TYPE_CHECKING:
    from hvdkit.core.state import TrainState


def _checked(cb: object, where: str) -> Callback:
    if not isinstance(cb, Callback):
        raise TypeError(f"{where} must be an hvdkit.core.Callback, got {type(cb).__name__} ({cb!r})")
    return cb


class Dispatcher:
    """Holds the callbacks of one training run and fires events at them.

    ``callbacks`` is read-only: change it through :meth:`add` and :meth:`clear`, which rebuild the
    per-event lists.
    """

    def __init__(self, callbacks: Iterable[Callback] = ()) -> None:
        checked = [_checked(cb, f"callbacks[{i}]") for i, cb in enumerate(callbacks)]
        # sorted() is stable: equal orders keep the user's order.
        self.callbacks: list[Callback] = sorted(checked, key=lambda cb: cb.order)
        self._by_event: dict[Event, list[Callback]] = {}
        self._rebuild()

    def _rebuild(self) -> None:
        self._by_event = {event: [cb for cb in self.callbacks if type(cb).overrides(event)] for event in Event}

    def add(self, callback: Callback) -> bool:
        """Add ``callback`` unless it is already here (by identity), keeping the order; True if added."""
        _checked(callback, "callback")
        if any(cb is callback for cb in self.callbacks):
            return False
        self.callbacks.append(callback)
        self.callbacks.sort(key=lambda cb: cb.order)
        self._rebuild()
        return True

    def clear(self) -> None:
        """Forget every callback (the next run registers its own)."""
        self.callbacks.clear()
        self._rebuild()

    def listeners(self, event: Event) -> list[Callback]:
        """The callbacks ``event`` reaches, in order: those whose class overrides its hook."""
        return self._by_event[event]

    def fire(self, event: Event, state: TrainState) -> None:
        """Run the hook for ``event`` of every callback that overrides it, in order."""
        for cb in self._by_event[event]:
            cb.run_event(event, state)

    def close(self) -> None:
        """Every callback's :meth:`~hvdkit.core.callback.Callback.close`, even when one raises (the first
        error is raised after all ran)."""
        error: BaseException | None = None
        for cb in self.callbacks:
            try:
                cb.close()
            except BaseException as exc:  # the others still release theirs
                error = error or exc
        if error is not None:
            raise error

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
