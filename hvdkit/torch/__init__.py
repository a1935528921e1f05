"""PyTorch adapter: Horovod's ring-allreduce for torch, driven by hvdkit's shared callbacks.

    import hvdkit.torch as hk
    hk.init()
    optimizer = hk.distribute(model, optimizer)
    trainer = hk.Trainer(model, optimizer, loss_fn, callbacks=[...])
    history = trainer.fit(train_dataset, epochs=5, batch_size=64, val_data=val_dataset)
"""

from hvdkit._imports import require

require("torch", extra="torch")
require("horovod.torch", extra="torch", horovod=True)

from hvdkit.torch.comm import HorovodComm  # noqa: E402
from hvdkit.torch.data import EvalShardSampler, shard  # noqa: E402
from hvdkit.torch.distribute import distribute  # noqa: E402
from hvdkit.torch.ops import TorchOps  # noqa: E402
from hvdkit.torch.runtime import init, local_rank, local_size, rank, size  # noqa: E402
from hvdkit.torch.trainer import History, Trainer  # noqa: E402

__all__ = ["EvalShardSampler", "History", "HorovodComm", "TorchOps", "Trainer", "distribute", "init", "local_rank",
           "local_size", "rank", "shard", "size"]
