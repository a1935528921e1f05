"""The Trainer's update: the ranks' gradients averaged, checked for NaN and inf on every rank alike, clipped
and applied (or, for an optimizer distributed with Adasum, the ranks' updates combined)."""

from __future__ import annotations

from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.comm import Comm
from hvdkit.core.numerics import NonFiniteGuard
from hvdkit.core.state import TrainState
from hvdkit.torch.precision import Precision, clip


class Update:
    """``update(loss, state)`` after a step's backward passes: ``nonfinite`` and ``clip_grad_norm`` as the
    :class:`~hvdkit.torch.trainer.Trainer` documents them."""

    def __init__(self, optimizer: Any, precision: Precision, guard: NonFiniteGuard, clip_grad_norm: float | None,
                 comm: Comm) -> None:
        self.optimizer, self.precision, self.guard, self.clip_grad_norm, self.comm = (
            optimizer, precision, guard, clip_grad_norm, comm)
        # Adasum's optimizer steps each rank's parameters in backward and combines the updates in step():
        # there are no averaged gradients to scale, clip or skip a step on.
        self.adasum = hasattr(optimizer, "_starting_models")
        for name, value, bad in (("precision", precision.precision, precision.precision == "fp16"),
                                 ("clip_grad_norm", clip_grad_norm, clip_grad_norm is not None),
                                 ("nonfinite", guard.policy, guard.policy == "skip")):
            if self.adasum and bad:
                raise ValueError(f"{name}={value!r} needs gradients averaged before the update, but the optimizer "
                                 "was distributed with op='adasum', which combines the ranks' updates instead; use "
                                 f"op='average', or leave {name} at its default")
        self.process_set = getattr(optimizer, "process_set", hvd.global_process_set)

    def __call__(self, loss: torch.Tensor, state: TrainState) -> None:
        """Average the gradients and update, unless ``nonfinite`` skips a non-finite step (or fp16 overflows)."""
        if self.precision.scaler is not None:  # the loss scaler skips non-finite steps on every rank itself
            self.precision.step(self.optimizer, self.clip_grad_norm)
            return
        if self.adasum:
            self._adasum(loss, state)
            return
        # How many ranks' losses are NaN or inf: summed beside the gradients' allreduce (a loss can be NaN
        # with finite gradients), read with the gradients' check below, so no extra wait on the host.
        bad_losses = self._count_bad_losses(loss)
        self.optimizer.synchronize()  # Horovod's DistributedOptimizer
        # a sparse gradient (nn.Embedding(sparse=True)) by its values: torch's norms take dense tensors only
        grads = [p.grad.coalesce().values() if p.grad.is_sparse else p.grad
                 for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]
        # One fused max-abs over all gradients: NaN and inf survive it, and it is the same on every rank.
        grads_finite = torch.isfinite(torch.nn.utils.get_total_norm(grads, float("inf"))) if grads else None
        losses_finite = hvd.synchronize(bad_losses)[0] == 0
        if grads_finite is None:
            finite = bool(losses_finite)
        else:
            finite = bool(torch.logical_and(grads_finite.to(losses_finite.device), losses_finite))
        if finite or self.guard.on_nonfinite(self.comm, state.global_step, state.epoch, bool(torch.isfinite(loss)),
                                             gradients_finite=grads_finite is None or bool(grads_finite)):
            clip(self.optimizer, self.clip_grad_norm)
            with self.optimizer.skip_synchronize():  # averaged already
                self.optimizer.step()

    def _adasum(self, loss: torch.Tensor, state: TrainState) -> None:
        """Combine the ranks' updates (Adasum), then apply ``nonfinite`` ("stop" or "warn") to the losses: Adasum
        updates in step() what it began in backward, so this check comes after the update, on the losses only."""
        self.optimizer.step()
        if bool(hvd.synchronize(self._count_bad_losses(loss))[0] > 0):
            self.guard.on_nonfinite(self.comm, state.global_step, state.epoch, bool(torch.isfinite(loss)),
                                    gradients_finite=True)

    def _count_bad_losses(self, loss: torch.Tensor) -> int:
        """The handle of an allreduce summing how many ranks' losses are NaN or inf."""
        return hvd.allreduce_async(torch.logical_not(torch.isfinite(loss)).to(torch.float32).reshape(1), op=hvd.Sum,
                                   name="hvdkit.trainer.nonfinite_loss", process_set=self.process_set)
