"""PyTorch adapter: Horovod's ring-allreduce for torch, driven by hvdkit's shared callbacks.

    import hvdkit.torch as hk
    hk.init()
    trainer = hk.Trainer(model, optimizer, loss_fn, callbacks=[...])   # wraps the optimizer (distribute)
    history = trainer.fit(train_dataset, epochs=5, batch_size=64, validation_data=val_dataset)
    history = hk.fit_elastic(trainer, train_dataset, epochs=5, batch_size=64)   # under horovodrun --min-np

A Horovod 0.28.1 script runs after ``import horovod.torch as hvd`` becomes ``import hvdkit.torch as hvd``:
Horovod's names (``__horovod_all__``, from :mod:`hvdkit.compat.horovod.torch`) sit beside hvdkit's own
(``__all__``).
"""

from hvdkit.core.imports import require

require("torch", extra="torch")
require("horovod.torch", extra="torch", horovod=True)

from typing import Any  # noqa: E402

from hvdkit.compat.horovod import export as _export  # noqa: E402
from hvdkit.compat.horovod import torch as _horovod_api  # noqa: E402
from hvdkit.core.deprecation import warn_renamed  # noqa: E402
from hvdkit.core.history import History  # noqa: E402
from hvdkit.torch.data import EvalShardSampler as _EvalShardSampler  # noqa: E402
from hvdkit.torch.data import shard, shard_sampler  # noqa: E402
from hvdkit.torch.distribute import distribute, is_distributed  # noqa: E402
from hvdkit.torch.elastic_adapter import fit_elastic  # noqa: E402
from hvdkit.torch.ops import TorchOps  # noqa: E402
from hvdkit.torch.runtime import HorovodComm, init, local_rank, local_size, rank, size  # noqa: E402
from hvdkit.torch.sync_batchnorm import SyncBatchNorm as _SyncBatchNorm  # noqa: E402
from hvdkit.torch.sync_batchnorm import convert_sync_batchnorm  # noqa: E402
from hvdkit.torch.trainer import Trainer  # noqa: E402

_horovod_getattr = _export(globals(), _horovod_api, "horovod.torch")  # Horovod's names; others: AttributeError


def __getattr__(name: str) -> Any:
    if name == "EvalShardSampler":  # deprecated for one release
        warn_renamed("hvdkit.torch.EvalShardSampler", "hvdkit.torch.shard_sampler(dataset, for_eval=True)")
        return _EvalShardSampler
    return _horovod_getattr(name)


# hvdkit's SyncBatchNorm keeps the name: Horovod's refuses CPU tensors, hvdkit's works on CPU and GPU.
SyncBatchNorm = _SyncBatchNorm

__all__ = ["History", "HorovodComm", "SyncBatchNorm", "TorchOps", "Trainer", "convert_sync_batchnorm", "distribute",
           "fit_elastic", "init", "is_distributed", "local_rank", "local_size", "rank", "shard", "shard_sampler",
           "size"]
