"""The Keras backend hvdkit.keras runs on, chosen once at import: ``current`` is :mod:`hvdkit.keras.backend_tf`
or :mod:`hvdkit.keras.backend_torch` (the same names: Horovod's binding ``hvd``, ``init`` and the world,
``shard``, the gradient allreduce, the non-finite flags and the variable broadcast). Everything else in
hvdkit.keras is written once, against Keras 3 and this module."""

from __future__ import annotations

import importlib
import os
from typing import Any

from hvdkit.core.imports import require
from hvdkit.runtime.frameworks import keras_backend

#: Keras backends hvdkit.keras runs on, and the module of each.
SUPPORTED = {"tensorflow": "hvdkit.keras.backend_tf", "torch": "hvdkit.keras.backend_torch"}


def requested() -> str:
    """The backend Keras will load (:func:`hvdkit.runtime.frameworks.keras_backend`: ``KERAS_BACKEND``, then
    ``keras.json``, then TensorFlow, or torch where it is the only framework installed)."""
    return keras_backend()[0]


def check(backend: str) -> None:
    """ImportError unless hvdkit.keras runs on ``backend``; JAX's names ``keras.distribution``, its native path."""
    if backend == "jax":
        raise ImportError("hvdkit.keras does not run Keras on JAX (KERAS_BACKEND=jax): on JAX use Keras's own "
                          "data-parallel API, keras.distribution (keras.distribution.DataParallel), or set "
                          "KERAS_BACKEND=torch or KERAS_BACKEND=tensorflow for hvdkit's Horovod path")
    if backend not in SUPPORTED:
        raise ImportError(f"hvdkit.keras runs Keras 3 on the TensorFlow or the PyTorch backend, got "
                          f"KERAS_BACKEND={backend!r}; set KERAS_BACKEND=tensorflow or KERAS_BACKEND=torch")


def _load() -> Any:
    name = requested()
    os.environ.setdefault("KERAS_BACKEND", name)  # Keras then loads the backend checked here
    check(name)
    if name == "torch":
        require("torch", extra="torch")
        require("keras", extra="tensorflow")
        require("horovod.torch", extra="torch", horovod=True)
    else:
        require("tensorflow", extra="tensorflow")
        require("keras", extra="tensorflow")
        require("horovod.tensorflow", extra="tensorflow", horovod=True)
    import keras

    loaded = keras.backend.backend()
    if not keras.__version__.startswith("3.") or loaded != name:
        raise ImportError(f"hvdkit.keras needs Keras 3 on the {name} backend (KERAS_BACKEND={name}), got keras "
                          f"{keras.__version__} with backend {loaded!r}: Keras was imported with another backend "
                          "before KERAS_BACKEND was set; set it before the first import of keras")
    return importlib.import_module(SUPPORTED[name])


#: The backend module in use (:mod:`hvdkit.keras.backend_tf` or :mod:`hvdkit.keras.backend_torch`).
current: Any = _load()
