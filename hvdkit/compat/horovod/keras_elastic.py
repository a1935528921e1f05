"""Horovod 0.28.1's ``horovod.tensorflow.keras.elastic`` names on Keras 3 (``hvd.elastic.*`` after
``import hvdkit.keras as hvd``), as ``hvdkit.keras.elastic``.

- ``KerasState(model, optimizer=None, **kwargs)`` (and ``TensorFlowKerasState``):
  :class:`hvdkit.keras.elastic_fit.KerasVariablesState`, which commits, restores and syncs the model's and
  optimizer's variables and the ``kwargs`` as Horovod's does (Horovod's own fails on Keras 3).
- ``run``: :func:`hvdkit.tensorflow.elastic_run.run`, Horovod's retry loop counting Horovod op errors as failures.
- ``CommitStateCallback``, ``UpdateBatchStateCallback``, ``UpdateEpochStateCallback``, ``ObjectState``:
  Horovod's own (plain Keras callbacks and state; they work on Keras 3).

hvdkit's own elastic training for Keras is :func:`hvdkit.keras.fit_elastic`.
"""

from horovod.common.elastic import ObjectState, State
from horovod.tensorflow.keras.elastic import CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback

from hvdkit.keras.elastic_fit import KerasVariablesState as KerasState
from hvdkit.tensorflow.elastic_run import run

TensorFlowKerasState = KerasState

__all__ = ["CommitStateCallback", "KerasState", "ObjectState", "State", "TensorFlowKerasState",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]
