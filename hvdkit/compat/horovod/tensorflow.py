"""Horovod 0.28.1's ``horovod.tensorflow`` API, for ``import hvdkit.tensorflow as hvd`` in a Horovod script.

Horovod's own objects, re-exported unchanged (Horovod's API reference is the contract), except where
Horovod touches variables (Keras 3 variables break it): those names are hvdkit's, with Horovod's signature,
defaults and semantics, on tf.Variables and Keras 3 variables alike:

- ``init(comm=None, process_sets=None)``: :func:`hvdkit.tensorflow.runtime.init` (also ``threads=``,
  ``timeline=``);
- ``DistributedGradientTape``, ``PartialDistributedGradientTape``: :mod:`hvdkit.tensorflow.gradients`
  (Horovod's own tape underneath, fed the tf.Variables behind Keras variables);
- ``broadcast_variables``, ``broadcast_``: Horovod's, on the tf.Variables behind Keras variables;
- ``DistributedOptimizer``: a Keras 3 optimizer goes to :func:`hvdkit.keras.optimizer.DistributedOptimizer`
  (Horovod's Keras wrapper fails on Keras 3); a ``tf.compat.v1`` optimizer to Horovod's own;
- ``SyncBatchNormalization``: raises (it subclasses Keras 2's BatchNormalization); see its message;
- ``elastic``: :mod:`hvdkit.compat.horovod.tensorflow_elastic`.

These names are ``hvdkit.tensorflow.__horovod_all__``; hvdkit's own are ``hvdkit.tensorflow.__all__``.
"""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as _hvd

from hvdkit.compat.horovod import tensorflow_elastic as elastic  # noqa: F401  (hvd.elastic)
from hvdkit.tensorflow.gradients import DistributedGradientTape as DistributedGradientTape
from hvdkit.tensorflow.gradients import PartialDistributedGradientTape as PartialDistributedGradientTape
from hvdkit.tensorflow.runtime import init as init
from hvdkit.tensorflow.variables import broadcast_variables as broadcast_variables
from hvdkit.tensorflow.variables import to_tf_variables

#: Horovod 0.28.1's public ``horovod.tensorflow`` names that are re-exported as they are.
_REEXPORTED = [
    "Adasum", "Average", "Compression", "LocalGradientAggregationHelper", "Max", "Min", "ProcessSet", "Product",
    "Sum", "add_process_set", "allgather", "allgather_object", "allreduce", "alltoall", "broadcast",
    "broadcast_global_variables", "broadcast_object", "broadcast_object_fn", "ccl_built", "cross_rank", "cross_size",
    "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled", "grouped_allgather",
    "grouped_allreduce", "grouped_reducescatter", "is_homogeneous", "is_initialized", "join", "local_rank",
    "local_rank_op", "local_size", "local_size_op", "mpi_built", "mpi_enabled", "mpi_threads_supported",
    "nccl_built", "process_set_included_op", "rank", "rank_op", "reducescatter", "remove_process_set", "rocm_built",
    "shutdown", "size", "size_op", "start_timeline", "stop_timeline",
]
globals().update({_name: getattr(_hvd, _name) for _name in _REEXPORTED})
HorovodInternalError = _hvd.elastic.HorovodInternalError


def broadcast_(variables: Any, root_rank: int, name: str | None = None,
               process_set: Any = _hvd.global_process_set) -> Any:
    """Horovod's in-place ``broadcast_`` on the tf.Variables behind Keras 3 variables (or tf.Variables)."""
    return _hvd.broadcast_(to_tf_variables(variables), root_rank, name=name, process_set=process_set)


def DistributedOptimizer(optimizer: Any, name: str | None = None, use_locking: bool = False, device_dense: str = "",
                         device_sparse: str = "", compression: Any = _hvd.Compression.none,
                         sparse_as_dense: bool = False, backward_passes_per_step: int = 1, op: Any = _hvd.Average,
                         gradient_predivide_factor: float = 1.0, average_aggregated_gradients: bool = False,
                         num_groups: int = 0, groups: Any = None, process_set: Any = _hvd.global_process_set,
                         scale_local_gradients: bool = True) -> Any:
    """Horovod's ``horovod.tensorflow.DistributedOptimizer``: a Keras 3 optimizer is wrapped by hvdkit's
    Keras 3 :func:`~hvdkit.keras.optimizer.DistributedOptimizer` (same arguments and semantics; Horovod's own
    Keras wrapper fails on Keras 3), a ``tf.compat.v1.train.Optimizer`` by Horovod's own."""
    import keras

    if isinstance(optimizer, keras.optimizers.Optimizer):
        from hvdkit.keras.optimizer import DistributedOptimizer as keras_optimizer

        return keras_optimizer(optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
                               compression=compression, sparse_as_dense=sparse_as_dense,
                               gradient_predivide_factor=gradient_predivide_factor, op=op,
                               backward_passes_per_step=backward_passes_per_step,
                               average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
                               groups=groups, process_set=process_set, scale_local_gradients=scale_local_gradients)
    return _hvd.DistributedOptimizer(optimizer, name, use_locking, device_dense, device_sparse, compression,
                                     sparse_as_dense, backward_passes_per_step, op, gradient_predivide_factor,
                                     average_aggregated_gradients, num_groups, groups, process_set,
                                     scale_local_gradients)


class SyncBatchNormalization:
    """Horovod's ``SyncBatchNormalization`` subclasses Keras 2's ``BatchNormalization`` and fails on Keras 3
    (its constructor arguments and ``_calculate_mean_and_var`` are gone); hvdkit does not provide it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "hvd.SyncBatchNormalization is not available with Keras 3: Horovod's layer subclasses Keras 2's "
            "BatchNormalization. Use keras.layers.BatchNormalization (statistics per worker), or, with PyTorch, "
            "hvdkit.torch.SyncBatchNorm (Horovod's, which works).")


#: Horovod internals that upstream's ``test_tensorflow.py`` reaches through ``hvd.``: provided, not public.
__horovod_internal__ = ["_executing_eagerly", "util"]
_executing_eagerly = _hvd._executing_eagerly
util = _hvd.util

#: Every Horovod name ``hvdkit.tensorflow`` provides (Horovod 0.28.1's ``horovod.tensorflow`` public API).
__horovod_all__ = sorted([*_REEXPORTED, "DistributedGradientTape", "DistributedOptimizer", "HorovodInternalError",
                          "PartialDistributedGradientTape", "SyncBatchNormalization", "broadcast_",
                          "broadcast_variables", "elastic", "init"])
__all__ = __horovod_all__
