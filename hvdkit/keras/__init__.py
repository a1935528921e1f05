"""Keras 3 adapter, on the TensorFlow or the PyTorch backend (``KERAS_BACKEND``, TensorFlow when unset),
built on Horovod's binding for that backend (upstream ``horovod.tensorflow.keras`` fails on Keras 3; hvdkit
does not use it). The code is the same on both: what differs lives in :mod:`hvdkit.keras.backend`.

    import hvdkit.keras as hk
    from hvdkit.keras.callbacks import BroadcastInitialState, LearningRateWarmup, MetricAverage, Checkpoint
    hk.init()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01 * hk.size())), loss=...)
    model.fit(x, y, callbacks=[BroadcastInitialState(), MetricAverage(), LearningRateWarmup(warmup_epochs=2)],
              verbose=hk.verbose())

A Horovod 0.28.1 script runs after ``import horovod.tensorflow.keras as hvd`` becomes ``import hvdkit.keras as
hvd`` (or, on TensorFlow, ``hvdkit.tensorflow.keras``): Horovod's names (``__horovod_all__``, from
:mod:`hvdkit.compat.horovod.keras`) sit beside hvdkit's own (``__all__``). On Keras's torch backend they come
from ``horovod.torch``; the few that need TensorFlow raise an AttributeError saying why and what to use. On
JAX the import refuses: Keras's own ``keras.distribution`` is the path there.
"""

from hvdkit.core.history import History
from hvdkit.keras.backend import current as _backend
from hvdkit.keras.elastic_fit import fit_elastic
from hvdkit.keras.optimizer import DistributedOptimizer, is_distributed
from hvdkit.keras.sync_batchnorm import SyncBatchNormalization

HorovodComm = _backend.HorovodComm
init, rank, size, local_rank, local_size = (_backend.init, _backend.rank, _backend.size, _backend.local_rank,
                                            _backend.local_size)
shard = _backend.shard

# after the backend's check: importing the compat module imports Keras (JAX must be refused first)
from hvdkit.compat.horovod import export as _export  # noqa: E402
from hvdkit.compat.horovod import keras as _horovod_api  # noqa: E402

# Horovod's names, for this backend; others: AttributeError (naming why, for the ones TensorFlow alone has)
__getattr__ = _export(globals(), _horovod_api, "horovod.tensorflow.keras")


def verbose(level: int = 1) -> int:
    """Keras ``fit(verbose=...)`` for this rank: ``level`` on rank 0, silent elsewhere."""
    return level if rank() == 0 else 0


__all__ = ["DistributedOptimizer", "History", "HorovodComm", "SyncBatchNormalization", "fit_elastic", "init",
           "is_distributed", "local_rank", "local_size", "rank", "shard", "size", "verbose"]
