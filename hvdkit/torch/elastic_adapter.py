"""Elastic training for PyTorch: :func:`fit_elastic` and what the core's
:class:`~hvdkit.core.elastic.loop.ElasticLoop` needs from torch. Run it under ``horovodrun
--min-np/--max-np --host-discovery-script`` (``hvdkit elastic-local`` on one machine)::

    history = hk.fit_elastic(trainer, train_dataset, epochs=10, batch_size=32, validation_data=val_dataset)

The loop's snapshot rides in Horovod's ``TorchState`` beside model and optimizer, committed with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any

import horovod.torch as hvd
import torch
from horovod.torch.elastic.state import ModelStateHandler, OptimizerStateHandler
from torch.utils.data import DataLoader, Dataset, Subset

from hvdkit.core.elastic.loop import ElasticLoop
from hvdkit.core.elastic.state import LoopCommit
from hvdkit.core.history import History
from hvdkit.core.types import Logs
from hvdkit.torch.broadcast import broadcast_optimizer_state, broadcast_parameters

if TYPE_CHECKING:
    from hvdkit.torch.trainer import Trainer

#: ``train_batches(loader, begin, end)``: the Trainer's batch loop (calls ``begin(i)``/``end(i, logs)``).
TrainBatches = Callable[[DataLoader, Callable[[int], None], Callable[[int, Logs], None]], dict[str, float]]


class _ModelHandler(ModelStateHandler):
    def sync(self) -> None:
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(OptimizerStateHandler):
    def sync(self) -> None:
        broadcast_optimizer_state(self.value, root_rank=0)


class TorchElasticState(LoopCommit, hvd.elastic.TorchState):
    """Horovod's ``TorchState`` (model, optimizer) plus the elastic loop's snapshot. Its sync broadcasts with
    hvdkit's functions (structure checked first; channels_last and other memory formats in place)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loop: ElasticLoop) -> None:
        self._loop = loop
        super().__init__(model=model, optimizer=optimizer, hvdkit=loop.snapshot())
        self._handlers["model"].__class__ = _ModelHandler
        self._handlers["optimizer"].__class__ = _OptimizerHandler


class TorchElasticAdapter:
    """The :class:`~hvdkit.core.elastic.loop.ElasticAdapter` for a PyTorch model and map-style dataset."""

    batch_end_in_step = True

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, dataset: Dataset, batch_size: int,
                 train_batches: TrainBatches,
                 validate: Callable[[Mapping[str, float]], dict[str, float]] | None = None) -> None:
        self.model, self.optimizer, self.dataset = model, optimizer, dataset
        self.batch_size, self.train_batches, self.validate = batch_size, train_batches, validate

    def make_state(self, loop: ElasticLoop) -> TorchElasticState:
        """Horovod's TorchState over model and optimizer, plus the loop's snapshot."""
        return TorchElasticState(self.model, self.optimizer, loop)

    def run(self, func: Callable[[Any], None]) -> Callable[[Any], None]:
        """``horovod.torch.elastic.run``."""
        return hvd.elastic.run(func)

    def train_steps(self, loop: ElasticLoop, indices: Sequence[int]) -> dict[str, float]:
        """Train this worker's ``indices`` with the Trainer's batch loop, then validate (the epoch is
        done when this returns); returns the means, ``val_*`` included."""
        loader = DataLoader(Subset(self.dataset, [int(i) for i in indices]), batch_size=self.batch_size)
        logs = self.train_batches(loader, loop.step_begin, loop.step_end)
        return logs if self.validate is None else self.validate(logs)


def fit_elastic(trainer: Trainer, train_data: Dataset, *, epochs: int, batch_size: int,
                validation_data: Dataset | DataLoader | None = None, commit_every: int = 10, shuffle: bool = True,
                seed: int = 0) -> History:
    """Train ``trainer`` under Horovod's elastic driver (``horovodrun --min-np/--max-np``), surviving
    workers that leave or join; the same shape as :func:`hvdkit.keras.fit_elastic`.

    The core's :class:`~hvdkit.core.elastic.loop.ElasticLoop` commits every ``commit_every`` steps and
    at each epoch end, rolls back after a failure and re-deals the rest of the epoch over the new
    workers. ``validation_data`` is evaluated at each epoch's end as in ``Trainer.fit``. Returns
    :class:`~hvdkit.core.history.History`; ``History.elastic`` holds the resets and recovery times.
    """
    if trainer.accumulate_steps != 1:
        raise ValueError(f"fit_elastic does not support accumulate_steps={trainer.accumulate_steps} yet (its "
                         "commits count batches); use accumulate_steps=1 with a larger batch_size")
    if not isinstance(train_data, Dataset) or not isinstance(train_data, Sized):
        raise TypeError("train_data must be a map-style torch Dataset with a length for fit_elastic, got "
                        f"{type(train_data).__name__}")
    validate = None
    if validation_data is not None:
        problem = trainer.validation_problem(validation_data, batch_size)
        if problem is not None:
            raise ValueError(problem)

        def validate(logs: Mapping[str, float]) -> dict[str, float]:
            return trainer.validate(validation_data, batch_size, logs)

    loop = ElasticLoop(trainer.engine, len(train_data), epochs=epochs, batch_size=batch_size,
                       commit_every=commit_every, shuffle=shuffle, seed=seed)
    return loop.run(TorchElasticAdapter(trainer.model, trainer.optimizer, train_data, batch_size,
                                        trainer.train_batches, validate))
