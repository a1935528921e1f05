"""Wrap a model and optimizer for data-parallel training with Horovod."""

from __future__ import annotations

from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.collectives import horovod_reduction
from hvdkit.core.comm import under_elastic_driver
from hvdkit.core.validation import check_int


def is_distributed(optimizer: Any) -> bool:
    """True for an optimizer that averages gradients over workers (one ``distribute`` returned)."""
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
    compressor, reduce_op = horovod_reduction(hvd, compression, op)
    check_int("backward_passes_per_step", backward_passes_per_step, minimum=1)
    if not under_elastic_driver():
        # Under the elastic driver the elastic state's first sync broadcasts instead: a worker
        # that joins later would otherwise wait here in a broadcast no one else is in (horovod#2652).
        hvd.broadcast_parameters(model.state_dict(), root_rank=root_rank)
        hvd.broadcast_optimizer_state(optimizer, root_rank=root_rank)
    return hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=compressor,
        backward_passes_per_step=backward_passes_per_step,
        op=reduce_op,
    )
