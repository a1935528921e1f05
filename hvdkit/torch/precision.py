"""Mixed precision for the PyTorch Trainer: autocast, and for fp16 a loss scaler that agrees across ranks.

``"bf16"``: forward under ``torch.autocast(dtype=torch.bfloat16)``; no loss scaling (float32's range).
``"fp16"``: a ``torch.amp.GradScaler`` whose overflow check is allreduced (max) after
``optimizer.synchronize()``, so every rank skips the same steps and keeps the same scale. The scale
changes only in ``update``, so it composes with ``accumulate_steps``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.validation import check_choice

#: The values ``Trainer(precision=...)`` accepts.
PRECISIONS = ("32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Precision:
    """The forward context, backward and optimizer step for one ``precision`` setting.

    ``skipped_steps``: fp16 steps skipped because some rank overflowed (the same on every rank)."""

    def __init__(self, precision: str, device: torch.device) -> None:
        self.precision = check_choice("precision", precision, PRECISIONS)
        self.device_type = device.type
        self.dtype = _DTYPES.get(precision)
        self.scaler = torch.amp.GradScaler(self.device_type) if precision == "fp16" else None
        self.skipped_steps = 0

    @property
    def loss_scale(self) -> float | None:
        """The fp16 loss scale now, or None for "32"/"bf16"."""
        return None if self.scaler is None else float(self.scaler.get_scale())

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The context to run forward passes (and the loss) in."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, of the scaled loss under fp16."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def step(self, optimizer: Any, clip_grad_norm: float | None = None) -> bool:
        """Average the gradients and step ``optimizer`` (Horovod's DistributedOptimizer); return False
        when the step was skipped because a rank's fp16 gradients overflowed. ``clip_grad_norm``: clip the
        averaged, unscaled gradients to that total 2-norm first (the order docs/pytorch.md gives)."""
        if self.scaler is None:
            if clip_grad_norm is None:
                optimizer.step()
                return True
            optimizer.synchronize()
            clip(optimizer, clip_grad_norm)
            with optimizer.skip_synchronize():
                optimizer.step()
            return True
        optimizer.synchronize()
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        overflow = agree_overflow(grads, self.device_type)
        if overflow and grads:
            # GradScaler decides from what unscale_ finds: make it find the overflow on every rank.
            grads[0].view(-1)[0] = float("inf")
        self.scaler.unscale_(optimizer)
        clip(optimizer, clip_grad_norm)  # after unscale_: its overflow check has seen the gradients as they were
        with optimizer.skip_synchronize():  # already averaged: no second allreduce
            self.scaler.step(optimizer)
        self.scaler.update()
        self.skipped_steps += int(overflow)
        return not overflow

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state (scale, growth tracker) for checkpoints; empty unless fp16."""
        return {} if self.scaler is None else dict(self.scaler.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`state_dict` returned (ignored unless fp16 and non-empty)."""
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)


def clip(optimizer: Any, max_norm: float | None) -> None:
    """Clip the gradients of ``optimizer``'s parameters to total 2-norm ``max_norm`` (None: leave them). Call it
    after ``optimizer.synchronize()``: the averaged gradients are the same on every rank, so is the clip."""
    if max_norm is not None:
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(params, max_norm)


def agree_overflow(grads: list[torch.Tensor], device_type: str = "cpu") -> bool:
    """True on every rank when any rank's ``grads`` hold an inf or NaN (one allreduce of a flag, max)."""
    local = torch.zeros(1, device=grads[0].device if grads else device_type)
    for g in grads:
        local = torch.maximum(local, (~torch.isfinite(g)).any().to(local.dtype))
    agreed = hvd.allreduce(local.cpu(), op=hvd.Max, name="hvdkit.precision.overflow")
    return bool(agreed.item() > 0)
