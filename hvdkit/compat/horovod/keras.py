"""Horovod 0.28.1's ``horovod.tensorflow.keras`` API on Keras 3, for ``import hvdkit.keras as hvd`` (or
``import hvdkit.tensorflow.keras as hvd``) in a Horovod script, on Keras's TensorFlow or torch backend.

Horovod's Keras layer fails on Keras 3. Its queries, reduce ops, compression and process sets come from
Horovod's binding for Keras's backend (``hvdkit.keras.backend.current.hvd``: ``horovod.tensorflow`` or
``horovod.torch``); its collectives on values (``allreduce``, ``allgather``, ``broadcast``,
``reducescatter``) are Horovod's Keras ones on TensorFlow and the same signatures over ``horovod.torch`` on
torch (a value in, a torch tensor out). What touches the model or optimizer (``DistributedOptimizer``,
``callbacks``, ``load_model``, ``elastic``, ``init``) is hvdkit's, with Horovod's signature and semantics.
The names in :data:`TF_ONLY` exist on TensorFlow only; on torch asking for one is an AttributeError saying
why and what to use. These names are ``hvdkit.keras.__horovod_all__``; hvdkit's own are ``hvdkit.keras.__all__``.
"""

from __future__ import annotations

from typing import Any

import keras

from hvdkit.keras import callbacks as callbacks
from hvdkit.keras.backend import current as _backend
from hvdkit.keras.optimizer import DistributedOptimizer as DistributedOptimizer
from hvdkit.keras.optimizer import is_distributed

_hvd = _backend.hvd  # horovod.tensorflow or horovod.torch
init = _backend.init

#: Horovod 0.28.1's public ``horovod.tensorflow.keras`` names, from the backend's Horovod binding as they are.
_REEXPORTED = [
    "Average", "Compression", "ProcessSet", "Sum", "add_process_set", "ccl_built", "cross_rank", "cross_size",
    "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled", "is_initialized", "local_rank",
    "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank", "remove_process_set",
    "rocm_built", "shutdown", "size", "start_timeline", "stop_timeline",
]
#: Horovod's Keras collectives on values (arrays, numbers, Keras variables).
_COLLECTIVES = ["allgather", "allreduce", "broadcast", "reducescatter"]

#: Horovod names that need TensorFlow: why, and what to use on Keras's torch backend.
TF_ONLY = {
    "broadcast_global_variables": "it broadcasts TensorFlow 1 graph variables (tf.compat.v1 sessions); on "
                                  "Keras's torch backend pass hvd.callbacks.BroadcastGlobalVariablesCallback(0) to "
                                  "fit (or hvdkit.keras.callbacks.BroadcastInitialState())",
    "elastic": "Horovod's Keras elastic API is built on horovod.tensorflow (its state and retry loop); on "
               "Keras's torch backend use hvdkit.keras.fit_elastic, or run Horovod's API with "
               "KERAS_BACKEND=tensorflow",
}

globals().update({_name: getattr(_hvd, _name) for _name in _REEXPORTED})

if _backend.NAME == "tensorflow":
    import horovod.tensorflow.keras as _hvd_keras

    from hvdkit.compat.horovod import keras_elastic as elastic  # noqa: F401  (hvd.elastic)

    globals().update({_name: getattr(_hvd_keras, _name) for _name in [*_COLLECTIVES, *TF_ONLY]
                      if _name != "elastic"})
else:
    def _tensor(value: Any) -> Any:
        """``value`` as a torch tensor (a Keras variable's value, detached: these return values, not graphs)."""
        tensor = keras.ops.convert_to_tensor(value)
        return tensor.detach() if isinstance(value, keras.Variable) else tensor

    def allreduce(value: Any, name: str | None = None, average: bool | None = None, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0, op: Any = None, compression: Any = _hvd.Compression.none) -> Any:
        """Horovod's Keras ``allreduce``: ``value`` reduced over every rank (``op``: Average by default)."""
        return _hvd.allreduce(_tensor(value), average=average, name=name, compression=compression, op=op,
                              prescale_factor=prescale_factor, postscale_factor=postscale_factor)

    def allgather(value: Any, name: str | None = None) -> Any:
        """Horovod's Keras ``allgather``: every rank's ``value`` concatenated along the first dimension."""
        return _hvd.allgather(_tensor(value), name=name)

    def broadcast(value: Any, root_rank: int, name: str | None = None) -> Any:
        """Horovod's Keras ``broadcast``: ``root_rank``'s ``value`` on every rank."""
        return _hvd.broadcast(_tensor(value), root_rank, name=name)

    def reducescatter(value: Any, name: str | None = None, op: Any = _hvd.Average) -> Any:
        """Horovod's Keras ``reducescatter``: ``value`` reduced over every rank, this rank's slice of the first
        dimension."""
        return _hvd.reducescatter(_tensor(value), name=name, op=op)


def load_model(filepath: Any, custom_optimizers: Any = None, custom_objects: Any = None,
               compression: Any = _hvd.Compression.none, legacy_opts: bool = False) -> keras.Model:
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


_AVAILABLE = [*_REEXPORTED, *_COLLECTIVES, "DistributedOptimizer", "callbacks", "init", "load_model"]
#: Every Horovod name ``hvdkit.keras`` provides on this backend (on TensorFlow: Horovod 0.28.1's whole
#: ``horovod.tensorflow.keras`` public API; on torch: all but :data:`TF_ONLY`).
__horovod_all__ = sorted(_AVAILABLE + (list(TF_ONLY) if _backend.NAME == "tensorflow" else []))
#: The Horovod names this backend lacks, each with why and what to use (an AttributeError on use).
__horovod_unavailable__: dict[str, str] = {} if _backend.NAME == "tensorflow" else {
    name: f"hvdkit.keras.{name} (Horovod's horovod.tensorflow.keras.{name}) is not available on KERAS_BACKEND=torch: "
          f"{why}" for name, why in TF_ONLY.items()}
__all__ = __horovod_all__
