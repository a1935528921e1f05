"""Horovod's ``horovod.tensorflow.elastic`` names, as ``hvdkit.tensorflow.elastic`` (``hvd.elastic.run``,
``hvd.elastic.ObjectState``, ``hvd.elastic.TensorFlowState``).

``ObjectState`` and ``TensorFlowState`` (tf.Variables) are Horovod's own, re-exported. ``run`` is
hvdkit's (:func:`hvdkit.tensorflow.elastic_run.run`): Horovod's counts an error as a worker failure
only by op type names that hvdkit's named ops and Gloo's own errors do not carry, and returns ``None``
for any other error; hvdkit's recognises those and raises the rest.
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
