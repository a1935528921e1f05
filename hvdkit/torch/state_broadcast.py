"""Broadcast a model's and an optimizer's state within a Horovod process set (hybrid parallelism).

Not named ``broadcast.py``: a submodule of that name would shadow Horovod's ``hvd.broadcast`` on ``hvdkit.torch``.
"""

from __future__ import annotations

from typing import Any

import horovod.torch as hvd
import torch


def broadcast_within(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root_rank: int,
                      process_set: Any) -> None:
    """``root_rank``'s parameters, buffers and optimizer state on every member of ``process_set``
    (Horovod's ``broadcast_parameters``/``broadcast_optimizer_state`` have no process-set argument).
    Every rank of the job calls it at the same point, each for its own set."""
    # Optimizer state through one world-wide allgather, as hvdkit.core.process_set does for objects; it also
    # lines every rank up before the first collective on a process set.
    states = hvd.allgather_object(optimizer.state_dict() if hvd.rank() == root_rank else None,
                                  name="hvdkit.state.optimizer")
    handles = [hvd.broadcast_async_(t, root_rank, name=f"hvdkit.state.{name}", process_set=process_set)
               for name, t in sorted(model.state_dict().items())]
    for handle in handles:
        hvd.synchronize(handle)
    if hvd.rank() != root_rank:
        optimizer.load_state_dict(states[root_rank])
