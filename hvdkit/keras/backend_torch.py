"""What ``hvdkit.keras`` does through PyTorch (``KERAS_BACKEND=torch``): Horovod's torch binding for the
gradient list, the non-finite flags and the variable broadcast; :mod:`hvdkit.torch`'s runtime and ``shard``.
Keras runs the torch backend's train step eagerly, so the decisions here are plain Python.
:mod:`hvdkit.keras.backend` picks this module or :mod:`hvdkit.keras.backend_tf`; both have the same names."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import horovod.torch as hvd
import keras
import numpy as np
import torch
from horovod.torch.elastic import run as elastic_run

from hvdkit.core.collectives import resolve_reduction
from hvdkit.core.comm import under_elastic_driver
from hvdkit.core.numerics import apply_policy
from hvdkit.torch.data import shard
from hvdkit.torch.runtime import HorovodComm, init, local_rank, local_size, rank, size

NAME = "torch"

__all__ = ["NAME", "HorovodComm", "agree_finite", "allreduce_gradients", "broadcast_variables", "elastic_run",
           "flags_verdict", "guarded_update", "hvd", "init", "local_rank", "local_size", "nonfinite_flags", "rank",
           "shard", "size", "sum_over_ranks"]


def _all_finite(grads: Sequence[Any]) -> torch.Tensor:
    """A boolean tensor (on the CPU): every value of every gradient is finite."""
    checks = [torch.isfinite(g).all() for g in grads if g is not None]
    return torch.stack(checks).all().cpu() if checks else torch.tensor(True)


def allreduce_gradients(grads: Sequence[Any], *, op: Any = "average", compression: Any = "none",
                        name_prefix: str = "hvdkit.grad", prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0, process_set: Any = None, groups: int | None = None,
                        **tf_only: Any) -> list[Any]:
    """Allreduce every gradient (``None`` stays ``None``), all in flight at once; ``groups=k``: ``k`` grouped
    allreduces. ``tf_only`` (``sparse_as_dense``, ``device_dense``, ``device_sparse``) has no meaning here:
    Keras's torch gradients are dense tensors on the variables' device."""
    del tf_only
    compressor, reduce_op = resolve_reduction(hvd, compression, op)
    process_set = hvd.global_process_set if process_set is None else process_set
    if process_set.size() == 1 and not under_elastic_driver():
        return list(grads)
    present = [i for i, g in enumerate(grads) if g is not None]
    packed = [compressor.compress(grads[i]) for i in present]
    kw = {"op": reduce_op, "prescale_factor": prescale_factor, "postscale_factor": postscale_factor,
          "process_set": process_set}
    reduced: list[Any] = []
    if groups:
        size = -(-len(packed) // groups)
        for k in range(0, len(packed), size):
            reduced += hvd.grouped_allreduce([t for t, _ in packed[k:k + size]], name=f"{name_prefix}.group{k}",
                                             **kw)
    else:
        handles = [hvd.allreduce_async(t, name=f"{name_prefix}.{i}", **kw) for i, (t, _) in zip(present, packed)]
        reduced = [hvd.synchronize(h) for h in handles]
    result: list[Any] = [None] * len(grads)
    for i, g, (_, ctx) in zip(present, reduced, packed):
        result[i] = compressor.decompress(g, ctx)
    return result


def nonfinite_flags(grads: list[Any], process_set: Any, name: str) -> torch.Tensor:
    """Which ranks' own ``grads`` are not finite: a flag per rank, summed over ``process_set`` (every step,
    so every rank runs the same collectives)."""
    flags = torch.zeros(hvd.size(), dtype=torch.float32)
    flags[hvd.rank()] = (~_all_finite(grads)).float()
    return hvd.allreduce(flags, op=hvd.Sum, name=name, process_set=process_set)


def flags_verdict(flags: torch.Tensor, reduced: list[Any]) -> tuple[list[int], bool]:
    """``(ranks whose own gradients were not finite, whether the update may run)`` from the summed flags and
    the averaged gradients: the same on every rank."""
    bad = [int(i) for i in torch.nonzero(flags > 0).flatten()]
    return bad, not bad and bool(_all_finite(reduced))


def guarded_update(finite: bool, update: Callable[[], None], policy: str, step: Any, bad_ranks: list[int]) -> None:
    """Run ``update`` when ``finite``; otherwise the ``nonfinite`` policy: ``stop`` raises
    :class:`~hvdkit.core.numerics.NonFiniteError` on every rank before the update, ``skip`` skips it,
    ``warn`` applies it; both with a warning."""
    if finite:
        update()
        return
    message = (f"non-finite gradients (NaN or inf) after the allreduce at step "
               f"{int(keras.ops.convert_to_numpy(step))}; the local gradients of this step were non-finite on "
               f"rank(s) {bad_ranks} (none: they overflowed in the allreduce)")
    if apply_policy(policy, message, lambda text: print("hvdkit WARNING:", text, file=sys.stderr, flush=True)):
        update()


def agree_finite(finite: Any, name: str) -> torch.Tensor:
    """``finite`` (a boolean tensor) and-ed over every rank: one allreduce (max) of an overflow flag."""
    overflow = (~torch.as_tensor(finite).cpu()).to(torch.float32).reshape(1)
    return hvd.allreduce(overflow, op=hvd.Max, name=name)[0] == 0


def broadcast_variables(variables: list[Any], root_rank: int, process_set: Any = None) -> None:
    """``root_rank``'s values of these Keras variables on every rank (of ``process_set``); named by position,
    as ranks may name a variable differently (Horovod pairs tensors by name)."""
    if not variables or hvd.size() == 1:
        return
    process_set = hvd.global_process_set if process_set is None else process_set
    with torch.no_grad():
        handles = [hvd.broadcast_async(v.value.detach(), root_rank, name=f"hvdkit.broadcast_variables.{i}",
                                       process_set=process_set) for i, v in enumerate(variables)]
        for v, h in zip(variables, handles):
            v.assign(hvd.synchronize(h))


class _SumOverRanks(torch.autograd.Function):
    """A sum allreduce whose gradient is the sum allreduce of the incoming gradients, both named.
    Horovod's own (``hvd.allreduce``, differentiable too) names its backward allreduce after a per-process
    handle counter, which differs on a worker that joined an elastic job: the ranks would wait on each other."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, name: str) -> torch.Tensor:  # type: ignore[override]
        ctx.name = name
        return hvd.synchronize(hvd.allreduce_async(tensor.contiguous(), op=hvd.Sum, name=name))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return hvd.synchronize(hvd.allreduce_async(grad.contiguous(), op=hvd.Sum, name=f"{ctx.name}.grad")), None


def sum_over_ranks(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """``tensor`` summed over every rank, differentiable: its gradient is the sum of the ranks' incoming
    gradients."""
    result: torch.Tensor = _SumOverRanks.apply(tensor, name)
    return result


def capture_rng() -> dict[str, Any]:
    """torch's global generator: Keras's torch data adapter shuffles with it (``RandomSampler``)."""
    return {"torch": torch.get_rng_state().numpy()}


def restore_rng(state: dict[str, Any]) -> None:
    """Put :func:`capture_rng`'s state back (a checkpoint of another backend holds none)."""
    if "torch" in state:
        torch.set_rng_state(torch.from_numpy(np.asarray(state["torch"], dtype=np.uint8)))
