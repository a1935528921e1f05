"""Wrap a model and optimizer for data-parallel training with Horovod."""

from __future__ import annotations

import horovod.torch as hvd
import torch

from hvdkit.core.validation import check_choice, check_int
from hvdkit.runtime.tuning import under_elastic_driver

_COMPRESSION = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16}
_OPS = {"average": hvd.Average, "sum": hvd.Sum, "adasum": hvd.Adasum}


def is_distributed(optimizer: torch.optim.Optimizer) -> bool:
    return hasattr(optimizer, "_allreduce_grad_async")


def distribute(model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, compression: str = "none",
               backward_passes_per_step: int = 1, op: str = "average", root_rank: int = 0) -> torch.optim.Optimizer:
    """Broadcast parameters and optimizer state from ``root_rank``; return Horovod's DistributedOptimizer.

    Gradients are averaged (``op="average"``) over workers by ring-allreduce as
    backward produces them; ``compression="fp16"`` halves the bytes on the wire.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if is_distributed(optimizer):
        raise ValueError("optimizer must be a plain torch optimizer, got one already wrapped by DistributedOptimizer")
    check_choice("compression", compression, list(_COMPRESSION))
    check_int("backward_passes_per_step", backward_passes_per_step, minimum=1)
    check_choice("op", op, list(_OPS))
    if not under_elastic_driver():
        # Under the elastic driver the elastic state's first sync broadcasts instead: a worker
        # that joins later would otherwise wait here in a broadcast no one else is in (horovod#2652).
        hvd.broadcast_parameters(model.state_dict(), root_rank=root_rank)
        hvd.broadcast_optimizer_state(optimizer, root_rank=root_rank)
    return hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=_COMPRESSION[compression],
        backward_passes_per_step=backward_passes_per_step,
        op=_OPS[op],
    )
