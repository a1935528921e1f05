"""Horovod 0.28.1's ``horovod.tensorflow.keras`` API on Keras 3, for ``import hvdkit.keras as hvd`` (or
``import hvdkit.tensorflow.keras as hvd``) in a Horovod script.

Horovod's Keras layer fails on Keras 3. Its collectives on values and its queries are re-exported; what
touches the model or optimizer (``DistributedOptimizer``, ``callbacks``, ``load_model``, ``elastic``,
``init``) is hvdkit's, with Horovod's signature and semantics. These names are
``hvdkit.keras.__horovod_all__``; hvdkit's own are ``hvdkit.keras.__all__``.
"""

from __future__ import annotations

from typing import Any

import horovod.tensorflow.keras as _hvd_keras
import keras

from hvdkit.compat.horovod import keras_elastic as elastic  # noqa: F401  (hvd.elastic)
from hvdkit.keras import callbacks as callbacks
from hvdkit.keras.optimizer import DistributedOptimizer as DistributedOptimizer
from hvdkit.keras.optimizer import is_distributed
from hvdkit.tensorflow.runtime import init as init

#: Horovod 0.28.1's public ``horovod.tensorflow.keras`` names that are re-exported as they are.
_REEXPORTED = [
    "Average", "Compression", "ProcessSet", "Sum", "add_process_set", "allgather", "allreduce", "broadcast",
    "broadcast_global_variables", "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built",
    "global_process_set", "gloo_built", "gloo_enabled", "is_initialized", "local_rank", "local_size", "mpi_built",
    "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank", "reducescatter", "remove_process_set",
    "rocm_built", "shutdown", "size", "start_timeline", "stop_timeline",
]
globals().update({_name: getattr(_hvd_keras, _name) for _name in _REEXPORTED})


def load_model(filepath: Any, custom_optimizers: Any = None, custom_objects: Any = None,
               compression: Any = _hvd_keras.Compression.none, legacy_opts: bool = False) -> keras.Model:
    """Horovod's ``load_model``: load a Keras model and wrap its optimizer in :func:`DistributedOptimizer`
    (with ``compression``), keeping its saved state. ``legacy_opts`` is not supported on Keras 3."""
    if legacy_opts:
        raise ValueError("legacy_opts=True loads tf_keras's legacy optimizers, which Keras 3 does not have; "
                         "save and load the model with Keras 3 optimizers (legacy_opts=False)")
    objects = {cls.__name__: cls for cls in (custom_optimizers or [])}
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    opt = getattr(model, "optimizer", None)
    if opt is None or is_distributed(opt):
        return model
    dist = DistributedOptimizer(type(opt).from_config(opt.get_config()), compression=compression)
    if opt.built:
        dist.build(model.trainable_variables)
        if len(dist.variables) != len(opt.variables):
            raise ValueError(f"the loaded optimizer has {len(opt.variables)} variables, its distributed copy "
                             f"{len(dist.variables)}: cannot carry its state over")
        for new, old in zip(dist.variables, opt.variables):
            new.assign(old)
    model.optimizer = dist
    return model


#: Every Horovod name ``hvdkit.keras`` provides (Horovod 0.28.1's ``horovod.tensorflow.keras`` public API).
__horovod_all__ = sorted([*_REEXPORTED, "DistributedOptimizer", "callbacks", "elastic", "init", "load_model"])
__all__ = __horovod_all__
