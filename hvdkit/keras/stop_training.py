"""``model.stop_training`` agreed across ranks inside ``model.fit``: a stop on one rank only (``TerminateOnNaN``,
an early stop on its own metrics) would leave the others waiting in the next allreduce.

While hvdkit drives ``fit`` the model's class is a subclass (a :func:`~hvdkit.keras.twin_class.twin_class`,
so a model saved meanwhile records the plain class) whose ``stop_training`` property combines every rank's flag
in one allreduce at ``fit``'s first read after each batch's and each epoch's callbacks; all ranks stop if any
rank does.
"""

from __future__ import annotations

from typing import Any

from hvdkit.core.comm import Comm
from hvdkit.keras.twin_class import twin_class

_CLASSES: dict[type, type] = {}
_VALUE, _COMM, _ARMED = "_hvdkit_stop_value", "_hvdkit_stop_comm", "_hvdkit_stop_armed"


class _AgreedStop:
    """The property; instance state lives in ``__dict__`` beside Keras's tracked attributes."""

    @property
    def stop_training(self) -> bool:
        """This rank's flag, or, on the read after a batch's or an epoch's callbacks, every rank's."""
        state = self.__dict__
        if state.get(_ARMED):
            state[_ARMED] = False
            mean = state[_COMM].allreduce_mean({"stop_training": 1.0 if state.get(_VALUE) else 0.0})
            state[_VALUE] = mean["stop_training"] > 0
        return bool(state.get(_VALUE, False))

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self.__dict__[_VALUE] = value

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "stop_training":  # Keras's tracking __setattr__ reads the old value: that must not agree
            self.__dict__[_VALUE] = value
            return
        super().__setattr__(name, value)


def _agreed_class(cls: type) -> type:
    if cls not in _CLASSES:
        _CLASSES[cls] = twin_class(_AgreedStop, cls)
    return _CLASSES[cls]


def agree(model: Any, comm: Comm) -> None:
    """From now on ``model.stop_training`` is agreed across ``comm``'s ranks at :func:`arm`'s reads."""
    if comm.size == 1 or isinstance(model, _AgreedStop):
        return
    value = bool(model.__dict__.get("stop_training", False))
    object.__setattr__(model, "__class__", _agreed_class(type(model)))  # not Keras's tracking __setattr__
    model.__dict__.update({_VALUE: value, _COMM: comm, _ARMED: False})


def arm(model: Any) -> None:
    """The next read of ``model.stop_training`` is ``fit``'s, after every callback of this batch or epoch."""
    if isinstance(model, _AgreedStop):
        model.__dict__[_ARMED] = True


def release(model: Any) -> None:
    """``model`` is of its own class again, ``stop_training`` a plain attribute with the last value."""
    if not isinstance(model, _AgreedStop):
        return
    value = bool(model.__dict__.pop(_VALUE, False))
    for key in (_COMM, _ARMED):
        model.__dict__.pop(key, None)
    base = next(c for c in type(model).__mro__[1:] if c is not _AgreedStop)
    object.__setattr__(model, "__class__", base)
    model.__dict__["stop_training"] = value
