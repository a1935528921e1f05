"""``hvdkit.tensorflow.keras`` is :mod:`hvdkit.keras` (Horovod's ``horovod.tensorflow.keras`` path):
``import hvdkit.tensorflow.keras as hvd`` gives the very same module, and its submodules
(``hvdkit.tensorflow.keras.callbacks``, ``hvdkit.tensorflow.keras.elastic``) are hvdkit.keras's."""

import sys

import hvdkit.keras as _keras
import hvdkit.keras.callbacks
import hvdkit.keras.elastic  # noqa: F401  (Horovod's name, in hvdkit.compat.horovod)

sys.modules[__name__] = _keras
for _sub in ("callbacks", "elastic"):
    sys.modules[f"{__name__}.{_sub}"] = sys.modules[f"hvdkit.keras.{_sub}"]
