"""The Trainer's evaluation: loss and metrics over a whole dataset, exact across ranks, and the
before-training check that a validation set fits the model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sized
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from hvdkit.core.comm import Comm
from hvdkit.core.hang_report import heartbeat
from hvdkit.core.validation import check_int
from hvdkit.torch.batch_means import BatchMeans
from hvdkit.torch.data import shard_sampler
from hvdkit.torch.precision import Precision

MetricFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Evaluation:
    """Evaluates ``model`` with ``loss_fn`` and ``metrics`` under ``precision`` on ``device``."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 metrics: Mapping[str, MetricFn], precision: Precision, device: torch.device, comm: Comm) -> None:
        self.model, self.loss_fn, self.metrics = model, loss_fn, metrics
        self.precision, self.device, self.comm = precision, device, comm

    def to_device(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """An ``(inputs, targets)`` batch on the model's device."""
        x, y = batch
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def problem(self, data: Any, batch_size: int | None) -> str | None:
        """Why ``data`` cannot be evaluated (one forward pass on its first batch), or None.

        Run before training, so a wrong validation set fails in seconds rather than after an epoch.
        """
        if isinstance(data, DataLoader):
            loader = data
        elif isinstance(data, Dataset) and isinstance(data, Sized):
            if len(data) == 0:
                return "validation_data must hold at least one sample, got an empty Dataset"
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                return f"batch_size must be an integer >= 1 to evaluate validation_data, got {batch_size!r}"
            loader = DataLoader(data, batch_size=batch_size)
        else:
            return f"validation_data must be a torch Dataset with a length or a DataLoader, got {type(data).__name__}"
        batch = next(iter(loader), None)
        if batch is None:
            return "validation_data must give at least one batch, got none"
        training = self.model.training
        try:
            with torch.no_grad(), self.precision.autocast():
                self.model.eval()
                x, y = self.to_device(batch)
                out = self.model(x)
                self.loss_fn(out, y)
                for fn in self.metrics.values():
                    fn(out, y)
        except Exception as exc:  # the framework's own message, prefixed with what was being checked
            return f"validation_data does not fit the model, loss or metrics (first batch): {type(exc).__name__}: {exc}"
        finally:
            self.model.train(training)
        return None

    def means(self) -> BatchMeans:
        """Loss/metric values kept on the model's device: read once per epoch, never synced per step."""
        return BatchMeans(["loss", *self.metrics], self.device)

    @torch.no_grad()
    def run(self, data: Any, batch_size: int | None) -> dict[str, float]:
        """Loss and metrics over the whole of ``data``, exact across ranks (disjoint, unpadded shards)."""
        if isinstance(data, DataLoader):
            loader = data
        else:
            batch_size = check_int("batch_size", batch_size, minimum=1)
            loader = DataLoader(data, batch_size=batch_size, sampler=shard_sampler(data, for_eval=True))
        self.model.eval()
        acc = self.means()
        for batch in loader:
            x, y = self.to_device(batch)
            with self.precision.autocast():
                out = self.model(x)
                acc.add([self.loss_fn(out, y)] + [fn(out, y) for fn in self.metrics.values()], len(y))
            heartbeat()  # validation runs no collective until its end: its batches are the progress
        keys = acc.names
        local = {f"sum_{k}": v for k, v in zip(keys, acc.sums())}
        local["count"] = float(acc.count)
        # mean over ranks of sums == global sum / size, for every entry alike: the ratio is exact.
        glob = self.comm.allreduce_mean(local)
        total = glob["count"]
        return {k: glob[f"sum_{k}"] / total for k in keys}
