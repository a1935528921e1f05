"""Batch normalisation whose batch statistics cover every worker's batch (Horovod collectives, CPU or GPU).

Horovod's ``horovod.torch.SyncBatchNorm`` only takes CUDA tensors. Here one allreduce sums every
worker's per-channel sums, squared sums and counts; Horovod's allreduce is differentiable, so the
gradients equal those of one worker holding the whole batch.

    model = hk.convert_sync_batchnorm(model)   # every BatchNorm*d becomes an hk.SyncBatchNorm
"""

from __future__ import annotations

import horovod.torch as hvd
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from hvdkit.core.comm import under_elastic_driver


class SyncBatchNorm(_BatchNorm):
    """``torch.nn.BatchNorm{1,2,3}d`` with statistics over all Horovod workers while training.

    Input ``(N, C, ...)``. In eval mode or with a single worker it is a plain batch norm; the running
    variance gets the global batch's unbiased variance, as torch does."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm needs input of shape (N, C, ...), got {input.dim()}-D input "
                             f"of shape {tuple(input.shape)}")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Normalise ``input`` with the global batch's statistics while training (one allreduce)."""
        self._check_input_dim(input)
        use_batch_stats = self.training or not self.track_running_stats
        if not use_batch_stats or (hvd.size() == 1 and not under_elastic_driver()):
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum

        channels = input.size(1)
        dims = [0, *range(2, input.dim())]
        x = input.float()  # statistics in float32 (also under autocast)
        count = x.new_full((1,), float(x.numel() // channels))
        total = hvd.allreduce(torch.cat([x.sum(dims), (x * x).sum(dims), count]), op=hvd.Sum)
        n = total[2 * channels]
        mean = total[:channels] / n
        var = (total[channels:2 * channels] / n - mean * mean).clamp_min(0.0)

        if self.training and self.track_running_stats:
            with torch.no_grad():
                assert self.running_mean is not None and self.running_var is not None
                unbiased = var * (n / (n - 1).clamp_min(1.0))
                self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)

        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out.to(input.dtype)


def convert_sync_batchnorm(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` with every batch-norm layer replaced by a :class:`SyncBatchNorm` sharing its parameters
    and running statistics (children converted in place; a batch-norm ``module`` itself is returned new)."""
    out = module
    if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
        out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats)
        if module.affine:
            with torch.no_grad():
                out.weight = module.weight
                out.bias = module.bias
        out.running_mean = module.running_mean
        out.running_var = module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.train(module.training)
    for name, child in module.named_children():
        out.add_module(name, convert_sync_batchnorm(child))
    return out

