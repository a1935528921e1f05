"""Memory formats (``torch.channels_last``, ``channels_last_3d``, any dense layout) through Horovod's collectives.

Horovod's torch ops take only row-major (``is_contiguous()``) tensors. A tensor whose elements fill its
memory without gaps or overlap, in some order of its dimensions, is row-major once its dimensions are
permuted into that order: the permuted view is an alias Horovod reduces or broadcasts in place, with no
copy. Only a tensor with gaps or overlap (a slice, an expanded view) goes through a row-major copy.
"""

from __future__ import annotations

from typing import Any

import horovod.torch as hvd
import torch


def row_major_alias(t: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...] | None] | None:
    """``(alias, order)``: ``alias = t.permute(order)`` is row-major and shares ``t``'s memory (``order`` is
    None when ``t`` is row-major itself); None when no permutation makes it row-major."""
    if t.is_contiguous():
        return t, None
    strides = t.stride()
    order = tuple(sorted(range(t.dim()), key=lambda d: (-strides[d], d)))  # outermost dimension first
    alias = t.permute(order)
    return (alias, order) if alias.is_contiguous() else None


def inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that undoes ``order``."""
    return tuple(sorted(range(len(order)), key=order.__getitem__))


def describe_format(t: torch.Tensor) -> str:
    """``t``'s memory format in words, the same for every layout with the same memory order."""
    if t.is_contiguous():
        return "row-major"
    for name in ("channels_last", "channels_last_3d"):
        fmt = getattr(torch, name)
        if t.dim() == (4 if name == "channels_last" else 5) and t.is_contiguous(memory_format=fmt):
            return name
    found = row_major_alias(t)
    return "not dense" if found is None else f"memory order {found[1]}"


def same_format(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` (of one shape) keep their elements in the same memory order."""
    return a.stride() == b.stride() or describe_format(a) == describe_format(b)


def broadcast_(named: list[tuple[str, torch.Tensor]], root_rank: int, process_set: Any = None) -> None:
    """Broadcast every tensor of ``named`` (``(name, tensor)``) in place from ``root_rank``, in any memory
    format: through a row-major alias, or for a tensor with gaps or overlap a row-major copy written back."""
    extra = {} if process_set is None else {"process_set": process_set}
    handles, copies = [], []
    for name, t in named:
        found = row_major_alias(t)
        if found is None:
            buf = t.detach().contiguous()
            copies.append((t, buf))
        else:
            buf = found[0]
        handles.append(hvd.broadcast_async_(buf.detach(), root_rank, name=name, **extra))
    for handle in handles:
        hvd.synchronize(handle)
    with torch.no_grad():
        for t, buf in copies:
            t.copy_(buf)


def match_formats(optimizer: torch.optim.Optimizer) -> None:
    """Lay out each optimizer state tensor of a parameter's shape as its parameter (``load_state_dict`` keeps a
    checkpoint's row-major layout; a fresh state follows the parameter's, and so must the broadcast's)."""
    for p, state in optimizer.state.items():
        for k, v in state.items():
            if isinstance(v, torch.Tensor) and v.shape == p.shape and v.layout == torch.strided \
                    and not same_format(v, p):
                state[k] = torch.empty_like(p, dtype=v.dtype, device=v.device).copy_(v)


class RowMajor:
    """A Horovod compressor that hands Horovod a row-major alias of each tensor (its dimensions permuted
    into memory order, no copy) around ``inner``, and gives the result back in the tensor's own layout:
    channels_last gradients are averaged in place."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def compress(self, tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """``inner``'s compression of a row-major alias of ``tensor`` (a copy when it has gaps or overlap)."""
        found = row_major_alias(tensor)
        alias, order = (tensor.contiguous(), None) if found is None else found
        compressed, ctx = self.inner.compress(alias)
        return compressed, (ctx, order)

    def decompress(self, tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """``inner``'s decompression, permuted back to the original tensor's dimensions and strides."""
        if ctx is None:  # Horovod's sparse path (allgathered values and indices) never compressed the tensor
            return self.inner.decompress(tensor, None)
        inner_ctx, order = ctx
        out = self.inner.decompress(tensor, inner_ctx)
        return out if order is None else out.permute(inverse(order))
