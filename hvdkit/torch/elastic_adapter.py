"""Elastic training for PyTorch: what the core's :class:`~hvdkit.core.elastic.loop.ElasticLoop` needs
from torch. Use it through :meth:`hvdkit.torch.Trainer.fit_elastic` under ``horovodrun
--min-np/--max-np --host-discovery-script`` (``hvdkit elastic-local`` on one machine).

Model and optimizer are Horovod's ``TorchState``; the loop's snapshot (counters, callback states,
LR, and the data position of the core's ``ElasticIndexSampler``, the same one Keras uses) rides in
it as a plain object, so it is committed, rolled back and synchronised with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import horovod.torch as hvd
import torch
from torch.utils.data import DataLoader, Dataset, Subset

from hvdkit.core.elastic.loop import ElasticLoop
from hvdkit.core.elastic.state import LoopCommit
from hvdkit.core.types import Logs

#: ``train_batches(loader, begin, end)``: the Trainer's batch loop (calls ``begin(i)``/``end(i, logs)``).
TrainBatches = Callable[[DataLoader, Callable[[int], None], Callable[[int, Logs], None]], dict[str, float]]


class TorchElasticState(LoopCommit, hvd.elastic.TorchState):
    """Horovod's ``TorchState`` (model, optimizer) plus the elastic loop's snapshot."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loop: ElasticLoop) -> None:
        self._loop = loop
        super().__init__(model=model, optimizer=optimizer, hvdkit=loop.snapshot())


class TorchElasticAdapter:
    """The :class:`~hvdkit.core.elastic.loop.ElasticAdapter` for a PyTorch model and map-style dataset."""

    batch_end_in_step = True

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, dataset: Dataset, batch_size: int,
                 train_batches: TrainBatches) -> None:
        self.model, self.optimizer, self.dataset = model, optimizer, dataset
        self.batch_size, self.train_batches = batch_size, train_batches

    def make_state(self, loop: ElasticLoop) -> TorchElasticState:
        """Horovod's TorchState over model and optimizer, plus the loop's snapshot."""
        return TorchElasticState(self.model, self.optimizer, loop)

    def run(self, func: Callable[[Any], None]) -> Callable[[Any], None]:
        """``horovod.torch.elastic.run``."""
        return hvd.elastic.run(func)

    def train_steps(self, loop: ElasticLoop, indices: Sequence[int]) -> dict[str, float]:
        """Train this worker's ``indices`` with the Trainer's batch loop; returns the means."""
        loader = DataLoader(Subset(self.dataset, [int(i) for i in indices]), batch_size=self.batch_size)
        return self.train_batches(loader, loop.step_begin, loop.step_end)
