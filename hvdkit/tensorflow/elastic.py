"""Horovod's ``horovod.tensorflow.elastic`` names, as ``hvdkit.tensorflow.elastic`` (``hvd.elastic.run``,
``hvd.elastic.ObjectState``, ``hvd.elastic.TensorFlowState``).

``run``, ``ObjectState`` and ``TensorFlowState`` (tf.Variables) are Horovod's own, re-exported.
``TensorFlowKerasState`` is hvdkit's Keras 3 state (:class:`hvdkit.keras.elastic.KerasState`):
Horovod's is built on ``horovod.tensorflow.keras``, which fails on Keras 3.
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
    run,
    run_fn,
    shutdown,
)

from hvdkit.tensorflow.variables import broadcast_variables


def __getattr__(name: str) -> Any:
    if name == "TensorFlowKerasState":
        from hvdkit.keras.elastic import KerasState

        return KerasState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HorovodInternalError", "ObjectState", "TensorFlowState", "broadcast_object", "broadcast_object_fn",
           "broadcast_variables", "init", "rank", "run", "run_fn", "shutdown"]
