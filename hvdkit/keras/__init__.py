"""Keras 3 adapter, on the TensorFlow or the PyTorch backend (``KERAS_BACKEND``, TensorFlow when unset),
built on Horovod's binding for that backend (upstream ``horovod.tensorflow.keras`` fails on Keras 3; hvdkit
does not use it). The code is the same on both: what differs lives in :mod:`hvdkit.keras.backend`.

    import hvdkit.keras as hk
    from hvdkit.keras.callbacks import BroadcastInitialState, LearningRateWarmup, MetricAverage, Checkpoint
    hk.init()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01 * hk.size())), loss=...)
    model.fit(x, y, callbacks=[BroadcastInitialState(), MetricAverage(), LearningRateWarmup(warmup_epochs=2)],
              verbose=hk.verbose())

On TensorFlow, a Horovod 0.28.1 script runs after ``import horovod.tensorflow.keras as hvd`` becomes
``import hvdkit.keras as hvd`` (or ``hvdkit.tensorflow.keras``): Horovod's names (``__horovod_all__``,
from :mod:`hvdkit.compat.horovod.keras`) sit beside hvdkit's own (``__all__``). On JAX the import
refuses: Keras's own ``keras.distribution`` is the path there.
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
_TF_ONLY: tuple[str, ...] = ()  # hvdkit's names that need Keras's TensorFlow backend: none

if _backend.NAME == "tensorflow":
    from hvdkit.compat.horovod import export as _export
    from hvdkit.compat.horovod import keras as _horovod_api

    __getattr__ = _export(globals(), _horovod_api, "horovod.tensorflow.keras")  # Horovod's names; others: error
else:
    def _not_on_torch(name: str) -> object:
        if name in _TF_ONLY:
            raise AttributeError(f"hvdkit.keras.{name} runs on Keras's TensorFlow backend only for now "
                                 "(KERAS_BACKEND=tensorflow); this process runs Keras on torch")
        raise AttributeError(f"module 'hvdkit.keras' has no attribute {name!r} (on KERAS_BACKEND=torch it has "
                             f"hvdkit's names only; Horovod's horovod.tensorflow.keras names need TensorFlow)")

    __getattr__ = _not_on_torch


def verbose(level: int = 1) -> int:
    """Keras ``fit(verbose=...)`` for this rank: ``level`` on rank 0, silent elsewhere."""
    return level if rank() == 0 else 0


__all__ = ["DistributedOptimizer", "History", "HorovodComm", "SyncBatchNormalization", "fit_elastic", "init",
           "is_distributed", "local_rank", "local_size", "rank", "shard", "size", "verbose"]
