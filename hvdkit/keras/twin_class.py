"""A subclass that Keras serialises as the class it extends: hvdkit swaps a model's or an optimizer's class
for one that adds behaviour (agreed ``stop_training``, averaged gradients), and a model saved meanwhile must
record, and reload as, the user's own class."""

from __future__ import annotations

from typing import Any


def twin_class(mixin: type, cls: type, **namespace: Any) -> type:
    """``class cls.__name__(mixin, cls)`` in ``cls``'s module under its qualified name, which Keras saves as
    ``cls``'s registered name ("package>Name" for a class under ``register_keras_serializable``)."""
    twin = type(cls.__name__, (mixin, cls), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                             **namespace})
    import keras

    registered = keras.saving.get_registered_name(cls)
    if registered != cls.__name__:
        # Keras looks the name up by the class itself, and offers no public way to give a second class the same
        # name; only the class-to-name map, so loading still finds the user's class by that name.
        from keras.src.saving import object_registration

        object_registration.GLOBAL_CUSTOM_NAMES[twin] = registered
    return twin
