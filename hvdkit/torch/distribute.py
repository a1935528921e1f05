"""Wrap a model and optimizer for data-parallel training with Horovod."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.collectives import horovod_reduction
from hvdkit.core.comm import under_elastic_driver
from hvdkit.core.deprecation import reject_unknown, renamed_kwarg
from hvdkit.core.process_set import check_process_set
from hvdkit.core.validation import check_int
from hvdkit.torch.broadcast import broadcast_optimizer_state, broadcast_parameters, broadcast_within
from hvdkit.torch.optimizer import torch_compatible


class FP16Compressor:
    """fp16 on the wire, cast into half buffers kept between steps and back into the gradient itself.

    Horovod's ``Compression.fp16`` allocates a new half and a new float32 tensor per gradient per step;
    for large gradients each gets fresh pages, whose first touch costs more than the bytes fp16 saves
    (docs/choosing-an-algorithm.md, "fp16 compression"). Costs one half-size buffer per gradient in flight.
    """

    def __init__(self) -> None:
        self._free: dict[tuple, list[torch.Tensor]] = defaultdict(list)
        self._lock = threading.Lock()  # compress runs in backward hooks, decompress in step()

    def compress(self, tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """A float16 copy of a floating-point ``tensor`` in a kept buffer, and what :meth:`decompress` needs."""
        if not tensor.is_floating_point() or tensor.dtype == torch.float16:
            return tensor, None
        key = (tuple(tensor.shape), tensor.device)
        with self._lock:
            free = self._free[key]
            half = free.pop() if free else torch.empty(tensor.shape, dtype=torch.float16, device=tensor.device)
        with torch.no_grad():
            half.copy_(tensor)
        return half, (tensor, half, key)

    def decompress(self, tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The reduced ``tensor`` cast back into the original gradient, which is returned; frees the buffer."""
        if ctx is None:
            return tensor
        original, half, key = ctx
        with torch.no_grad():
            original.copy_(tensor)
        with self._lock:
            self._free[key].append(half)
        return original


def is_distributed(optimizer: Any) -> bool:
    """True for an optimizer that averages gradients over workers (one ``distribute`` returned)."""
    return hasattr(optimizer, "_allreduce_grad_async")


def start_alike(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root_rank: int, process_set: Any) -> None:
    """``root_rank``'s parameters, buffers and optimizer state on every rank (of ``process_set``)."""
    if under_elastic_driver():
        # The elastic state's first sync broadcasts instead: a worker that joins later would otherwise wait
        # here in a broadcast no one else is in.
        return
    if process_set is None:
        broadcast_parameters(model.state_dict(), root_rank=root_rank)
        broadcast_optimizer_state(optimizer, root_rank=root_rank)
    else:
        broadcast_within(model, optimizer, root_rank, process_set)


def distribute(model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, compression: str = "none",
               accumulate_steps: int = 1, op: str = "average", root_rank: int | None = None,
               process_set: Any = None, **deprecated: Any) -> torch.optim.Optimizer:
    """Broadcast parameters and optimizer state from ``root_rank`` (default: rank 0); return Horovod's
    DistributedOptimizer, made to behave like ``optimizer`` (:mod:`hvdkit.torch.optimizer`).

    Gradients are averaged (``op="average"``) over workers by ring-allreduce as
    backward produces them; ``compression="fp16"`` halves the bytes on the wire (:class:`FP16Compressor`).

    ``accumulate_steps=k``: communicate and step once every ``k`` backward passes (Horovod's
    ``backward_passes_per_step``, the name ``hvd.DistributedOptimizer`` keeps).

    ``process_set`` (a Horovod ``ProcessSet`` this rank belongs to; hybrid parallelism): the broadcast
    and the gradient averaging stay within that set; ``root_rank`` (a global rank) must be one of its
    members and defaults to its first. Default: all ranks.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if is_distributed(optimizer):
        raise ValueError("optimizer must be a plain torch optimizer, got one already wrapped by DistributedOptimizer")
    accumulate_steps = renamed_kwarg("distribute", deprecated, "backward_passes_per_step", "accumulate_steps",
                                     accumulate_steps, 1)
    reject_unknown("distribute", deprecated)
    compressor, reduce_op = horovod_reduction(hvd, compression, op)
    if compression == "fp16" and op != "adasum":  # Adasum compresses the parameters, not gradients
        compressor = FP16Compressor()
    accumulate_steps = check_int("accumulate_steps", accumulate_steps, minimum=1)
    process_set = check_process_set(process_set)
    if root_rank is None:
        root_rank = 0 if process_set is None else min(process_set.ranks)
    root_rank = check_int("root_rank", root_rank, minimum=0)
    if process_set is not None and root_rank not in process_set.ranks:
        raise ValueError(f"root_rank must be a member of process_set (ranks {sorted(process_set.ranks)}), "
                         f"got {root_rank}")
    start_alike(model, optimizer, root_rank, process_set)
    extra = {} if process_set is None else {"process_set": process_set}
    distributed = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=compressor,
        backward_passes_per_step=accumulate_steps,
        op=reduce_op,
        **extra,
    )
    distributed = torch_compatible(distributed, optimizer)
    distributed._hvdkit_started = True  # every rank holds root_rank's state: the Trainer broadcasts nothing more
    return distributed

