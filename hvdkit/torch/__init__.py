"""PyTorch adapter: Horovod's ring-allreduce for torch, driven by hvdkit's shared callbacks.

    import hvdkit.torch as hk
    hk.init()
    trainer = hk.Trainer(model, optimizer, loss_fn, callbacks=[...])   # wraps the optimizer (distribute)
    history = trainer.fit(train_dataset, epochs=5, batch_size=64, val_data=val_dataset)
"""

from hvdkit._imports import require

require("torch", extra="torch")
require("horovod.torch", extra="torch", horovod=True)

from hvdkit.core.history import History  # noqa: E402
from hvdkit.torch.comm import HorovodComm  # noqa: E402
from hvdkit.torch.data import EvalShardSampler, shard, shard_sampler  # noqa: E402
from hvdkit.torch.distribute import distribute, is_distributed  # noqa: E402
from hvdkit.torch.ops import TorchOps  # noqa: E402
from hvdkit.torch.runtime import init, local_rank, local_size, rank, size  # noqa: E402
from hvdkit.torch.sync_batchnorm import SyncBatchNorm, convert_sync_batchnorm  # noqa: E402
from hvdkit.torch.trainer import Trainer  # noqa: E402

__all__ = ["EvalShardSampler", "History", "HorovodComm", "SyncBatchNorm", "TorchOps", "Trainer",
           "convert_sync_batchnorm", "distribute", "init", "is_distributed", "local_rank", "local_size", "rank",
           "shard", "shard_sampler", "size"]
