"""Horovod 0.28.1's ``horovod.torch`` API, for ``import hvdkit.torch as hvd`` in a Horovod script.

Every name is Horovod's own object, re-exported unchanged (Horovod's API reference is the contract),
except ``init`` (:func:`hvdkit.torch.runtime.init`: Horovod's signature plus ``threads=``/``timeline=``),
``elastic`` (:mod:`hvdkit.compat.horovod.torch_elastic`), and
``broadcast_parameters``/``broadcast_optimizer_state`` (:mod:`hvdkit.torch.ops`: after a check that every rank
broadcasts the same structure; any memory format; no optimizer step to create a state, but the zero gradients
Horovod's step left on a fresh optimizer's parameters, which Horovod scripts read).
These names are ``hvdkit.torch.__horovod_all__``; hvdkit's own are ``hvdkit.torch.__all__``.
"""

from __future__ import annotations

from typing import Any

import horovod.torch as _hvd
import torch

from hvdkit.compat.horovod import torch_elastic as elastic  # noqa: F401  (hvd.elastic)
from hvdkit.torch import ops as _ops
from hvdkit.torch.broadcast import broadcast_parameters as broadcast_parameters
from hvdkit.torch.runtime import init as init

#: Horovod 0.28.1's public ``horovod.torch`` names that are re-exported as they are.
_REEXPORTED = [
    "Adasum", "Average", "Compression", "DistributedOptimizer", "HorovodInternalError", "Max", "Min", "Product",
    "ProcessSet", "Sum", "SyncBatchNorm", "add_process_set", "allgather", "allgather_async", "allgather_object",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "alltoall", "alltoall_async", "barrier",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "broadcast_object",
    "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built", "global_process_set",
    "gloo_built", "gloo_enabled", "grouped_allgather", "grouped_allgather_async", "grouped_allreduce",
    "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_", "grouped_reducescatter",
    "grouped_reducescatter_async", "is_initialized", "join", "local_rank", "local_size", "mpi_built", "mpi_enabled",
    "mpi_threads_supported", "nccl_built", "poll", "rank", "reducescatter", "reducescatter_async",
    "remove_process_set", "rocm_built", "shutdown", "size", "sparse_allreduce_async", "start_timeline",
    "stop_timeline", "synchronize",
]
globals().update({_name: getattr(_hvd, _name) for _name in _REEXPORTED})


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int, model: Any = None) -> None:
    """Horovod's ``broadcast_optimizer_state``: :func:`hvdkit.torch.ops.broadcast_optimizer_state`, which takes
    no optimizer step (Horovod's moved the weights by weight decay), then, on a fresh optimizer, the zero
    gradient Horovod's step left on each trainable parameter that had none."""
    fresh = not optimizer.state
    _ops.broadcast_optimizer_state(optimizer, root_rank, model=model)
    if fresh:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)  # in the parameter's own memory format

#: Every Horovod name ``hvdkit.torch`` provides (Horovod 0.28.1's ``horovod.torch`` public API).
__horovod_all__ = sorted([*_REEXPORTED, "broadcast_optimizer_state", "broadcast_parameters", "elastic", "init"])
__all__ = __horovod_all__
