"""Horovod's ``horovod.tensorflow.elastic`` names, as ``hvdkit.tensorflow.elastic`` (``hvd.elastic.run``,
``hvd.elastic.ObjectState``, ``hvd.elastic.TensorFlowState``).

``ObjectState`` and ``TensorFlowState`` are Horovod's own. ``run`` is
:func:`hvdkit.tensorflow.elastic_run.run`, and ``TensorFlowKerasState`` is
:class:`hvdkit.keras.elastic.KerasState` (Horovod's fails on Keras 3).
"""

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
    if name == "TensorFlowKerasState":
        from hvdkit.keras.elastic import KerasState

        return KerasState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HorovodInternalError", "ObjectState", "TensorFlowState", "broadcast_object", "broadcast_object_fn",
           "broadcast_variables", "init", "is_worker_failure", "rank", "run", "run_fn", "shutdown"]
