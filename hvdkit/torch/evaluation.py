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
    """Evaluates ``trainer.model`` with its ``loss_fn`` and ``metrics`` under its ``precision`` on its
    ``device``, read at each use: a trainer whose attributes are reassigned evaluates what it trains."""

    def __init__(self, trainer: Any) -> None:
        self._trainer = trainer

    @property
    def model(self) -> torch.nn.Module:
        """The trainer\'s ``model``."""
        return self._trainer.model

    @property
    def loss_fn(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The trainer\'s ``loss_fn``."""
        return self._trainer.loss_fn

    @property
    def metrics(self) -> Mapping[str, MetricFn]:
        """The trainer\'s ``metrics``."""
        return self._trainer.metrics

    @property
    def precision(self) -> Precision:
        """The trainer\'s ``precision``."""
        return self._trainer.precision

    @property
    def device(self) -> torch.device:
        """The trainer\'s ``device``."""
        return self._trainer.device

    @property
    def comm(self) -> Comm:
        """The trainer\'s ``comm``."""
        return self._trainer.comm

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
            try:
                batch_size = check_int("batch_size", batch_size, minimum=1)
            except ValueError as exc:
                return f"{exc} (to evaluate validation_data)"
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
