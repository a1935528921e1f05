"""Horovod 0.28.1's ``horovod.tensorflow.keras.elastic`` names on Keras 3 (``hvd.elastic.*`` after
``import hvdkit.keras as hvd``).

- ``KerasState(model, optimizer=None, **kwargs)`` (and ``TensorFlowKerasState``): hvdkit's Keras 3 state
  (:class:`hvdkit.keras.elastic_fit.KerasVariablesState`): commits, restores and syncs the model's and
  optimizer's variables and the ``kwargs`` (``state.epoch``, ``state.batch``) as Horovod's does.
  Horovod's own calls ``optimizer.get_weights()`` and broadcasts Keras 3 variables, both of which fail.
- ``run``: Horovod's elastic retry loop; any Horovod op error in ``model.fit`` counts as a worker failure
  (:func:`hvdkit.tensorflow.elastic.run`), any other error is raised.
- ``CommitStateCallback``, ``UpdateBatchStateCallback``, ``UpdateEpochStateCallback``, ``ObjectState``:
  Horovod's own (plain Keras callbacks and state; they work on Keras 3).

hvdkit's own elastic training for Keras is :func:`hvdkit.keras.fit_elastic`.
"""

from horovod.common.elastic import ObjectState, State
from horovod.tensorflow.keras.elastic import CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback

from hvdkit.keras.elastic_fit import KerasVariablesState as KerasState
from hvdkit.tensorflow.elastic import run

TensorFlowKerasState = KerasState

__all__ = ["CommitStateCallback", "KerasState", "ObjectState", "State", "TensorFlowKerasState",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]
