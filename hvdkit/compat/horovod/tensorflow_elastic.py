"""Horovod's ``horovod.tensorflow.elastic`` names, as ``hvdkit.tensorflow.elastic`` (``hvd.elastic.run``,
``hvd.elastic.ObjectState``, ``hvd.elastic.TensorFlowState``).

``ObjectState`` and ``TensorFlowState`` are Horovod's own; ``TensorFlowKerasState`` is
:class:`hvdkit.keras.elastic_fit.KerasVariablesState` (Horovod's fails on Keras 3); ``run`` is
:func:`hvdkit.tensorflow.elastic_run.run`, which counts hvdkit's op names and Gloo's errors as lost workers.
"""

from __future__ import annotations

from typing import Any

from horovod.tensorflow.elastic import (
    HorovodInternalError,
    ObjectState,
    TensorFlowState,
    broadcast_object,
    broadcast_object_fn,
    init,
    rank,
    run_fn,
    shutdown,
)

from hvdkit.tensorflow.elastic_run import is_worker_failure, run
from hvdkit.tensorflow.variables import broadcast_variables


def __getattr__(name: str) -> Any:
    if name == "TensorFlowKerasState":  # on use: it needs Keras, which a TensorFlow-only script never imports
        from hvdkit.keras.elastic_fit import KerasVariablesState

        return KerasVariablesState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HorovodInternalError", "ObjectState", "TensorFlowState", "broadcast_object", "broadcast_object_fn",
           "broadcast_variables", "init", "is_worker_failure", "rank", "run", "run_fn", "shutdown"]
