"""Keras 3 adapter (TensorFlow backend), built on ``horovod.tensorflow`` collectives (upstream
``horovod.tensorflow.keras`` fails on Keras 3; hvdkit does not use it).

    import hvdkit.keras as hk
    from hvdkit.keras.callbacks import BroadcastInitialState, LearningRateWarmup, MetricAverage, Checkpoint
    hk.init()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01 * hk.size())), loss=...)
    model.fit(x, y, callbacks=[BroadcastInitialState(), MetricAverage(), LearningRateWarmup(warmup_epochs=2)],
              verbose=hk.verbose())

A Horovod 0.28.1 script runs after ``import horovod.tensorflow.keras as hvd`` becomes
``import hvdkit.keras as hvd`` (or ``hvdkit.tensorflow.keras``): Horovod's names (``__horovod_all__``,
from :mod:`hvdkit.compat.horovod.keras`) sit beside hvdkit's own (``__all__``).
"""

import os

from hvdkit.core.imports import require

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
require("tensorflow", extra="tensorflow")
require("keras", extra="tensorflow")
require("horovod.tensorflow", extra="tensorflow", horovod=True)

import keras  # noqa: E402

if not keras.__version__.startswith("3.") or keras.backend.backend() != "tensorflow":
    raise ImportError(f"hvdkit.keras needs Keras 3 on the TensorFlow backend, got keras {keras.__version__} "
                      f"with backend {keras.backend.backend()!r}; set KERAS_BACKEND=tensorflow")

from hvdkit.compat.horovod import export as _export  # noqa: E402
from hvdkit.compat.horovod import keras as _horovod_api  # noqa: E402
from hvdkit.core.history import History  # noqa: E402
from hvdkit.keras.elastic_fit import fit_elastic  # noqa: E402
from hvdkit.keras.optimizer import DistributedOptimizer, is_distributed  # noqa: E402
from hvdkit.keras.sync_batchnorm import SyncBatchNormalization  # noqa: E402
from hvdkit.tensorflow.data import shard  # noqa: E402
from hvdkit.tensorflow.runtime import HorovodComm, init, local_rank, local_size, rank, size  # noqa: E402

__getattr__ = _export(globals(), _horovod_api, "horovod.tensorflow.keras")  # Horovod's names; others: AttributeError


def verbose(level: int = 1) -> int:
    """Keras ``fit(verbose=...)`` for this rank: ``level`` on rank 0, silent elsewhere."""
    return level if rank() == 0 else 0


__all__ = ["DistributedOptimizer", "History", "HorovodComm", "SyncBatchNormalization", "fit_elastic", "init",
           "is_distributed", "local_rank", "local_size", "rank", "shard", "size", "verbose"]
