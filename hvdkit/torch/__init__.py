"""PyTorch adapter: Horovod's ring-allreduce for torch, driven by hvdkit's shared callbacks.

    import hvdkit.torch as hk
    hk.init()
    trainer = hk.Trainer(model, optimizer, loss_fn, callbacks=[...])   # wraps the optimizer (distribute)
    history = trainer.fit(train_dataset, epochs=5, batch_size=64, val_data=val_dataset)

A Horovod 0.28.1 script runs after ``import horovod.torch as hvd`` becomes ``import hvdkit.torch as hvd``:
Horovod's names (``__horovod_all__``, from :mod:`hvdkit.torch.horovod_api`) sit beside hvdkit's own
(``__all__``).
"""

from hvdkit._imports import require

require("torch", extra="torch")
require("horovod.torch", extra="torch", horovod=True)

from hvdkit.core.history import History  # noqa: E402
from hvdkit.torch import horovod_api as _horovod_api  # noqa: E402
from hvdkit.torch.comm import HorovodComm  # noqa: E402
from hvdkit.torch.data import EvalShardSampler, shard, shard_sampler  # noqa: E402
from hvdkit.torch.distribute import distribute, is_distributed  # noqa: E402
from hvdkit.torch.ops import TorchOps  # noqa: E402
from hvdkit.torch.runtime import init, local_rank, local_size, rank, size  # noqa: E402
from hvdkit.torch.sync_batchnorm import SyncBatchNorm as _SyncBatchNorm  # noqa: E402
from hvdkit.torch.sync_batchnorm import convert_sync_batchnorm  # noqa: E402
from hvdkit.torch.trainer import Trainer  # noqa: E402

globals().update({_n: getattr(_horovod_api, _n) for _n in _horovod_api.__horovod_all__})
__horovod_all__ = list(_horovod_api.__horovod_all__)


def __getattr__(name: str) -> object:
    """Anything else of ``horovod.torch`` (its internals, e.g. ``hvd.util``, that scripts and upstream's tests
    reach) falls through to Horovod's module, so a Horovod name never fails with AttributeError here."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # an hvdkit submodule not imported yet
        return importlib.import_module(f"{__name__}.{name}")
    import horovod.torch as _upstream

    try:
        return getattr(_upstream, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (nor has horovod.torch)") from None


# hvdkit's SyncBatchNorm keeps the name: Horovod's refuses CPU tensors, hvdkit's works on CPU and GPU.
SyncBatchNorm = _SyncBatchNorm

__all__ = ["EvalShardSampler", "History", "HorovodComm", "SyncBatchNorm", "TorchOps", "Trainer",
           "convert_sync_batchnorm", "distribute", "init", "is_distributed", "local_rank", "local_size", "rank",
           "shard", "shard_sampler", "size"]
