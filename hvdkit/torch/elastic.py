"""Elastic training for PyTorch: Horovod's elastic driver with hvdkit's engine and callbacks.

Run it under ``horovodrun --min-np/--max-np --host-discovery-script`` (see
``hvdkit.elastic_local`` for one machine). Model, optimizer and the ElasticSampler's position
are Horovod's ``TorchState``; hvdkit adds the engine's counters and every callback's state to
each commit, so after a failure the survivors roll back to the last commit, the data of the
rest of the epoch is re-sharded over the new set of workers, and the LR follows the linear
scaling rule (warm-up continues at the right step).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import horovod.torch as hvd
import torch
from torch.utils.data import DataLoader, Dataset

from hvdkit.core.elastic import ElasticProgress
from hvdkit.core.validation import check_int

if TYPE_CHECKING:
    from hvdkit.torch.trainer import History, Trainer


class ElasticState(hvd.elastic.TorchState):
    """Horovod's TorchState plus hvdkit's progress (counters and callback states)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 sampler: hvd.elastic.ElasticSampler, progress: ElasticProgress) -> None:
        self._progress = progress
        super().__init__(model=model, optimizer=optimizer, sampler=sampler, hvdkit=progress.snapshot())

    def save(self) -> None:
        self.hvdkit = self._progress.snapshot()
        super().save()

    def restore(self) -> None:  # Horovod calls this when a collective failed
        self._progress.failure_noticed()
        super().restore()
        self._progress.apply(self.hvdkit)

    def sync(self) -> None:
        super().sync()
        self._progress.apply(self.hvdkit)


def fit_elastic(trainer: Trainer, train_data: Dataset, epochs: int, *, batch_size: int, commit_every: int = 10,
                shuffle: bool = True, seed: int = 0) -> History:
    """Like :meth:`Trainer.fit`, surviving workers that leave or join (see the module docstring)."""
    from hvdkit.torch.trainer import History

    check_int("epochs", epochs, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    engine, s = trainer.engine, trainer.engine.state
    progress = ElasticProgress(engine, commit_every)
    sampler = hvd.elastic.ElasticSampler(train_data, shuffle=shuffle, seed=seed)
    loader = DataLoader(train_data, batch_size=batch_size, sampler=sampler)
    n = len(train_data)  # type: ignore[arg-type]

    def steps_per_epoch() -> int:
        return math.ceil(n / (batch_size * hvd.size()))

    s.extra["elastic"] = True
    engine.train_begin(epochs, steps_per_epoch=steps_per_epoch())  # rank 0 may resume a checkpoint here
    sampler.set_epoch(s.epoch)
    state = ElasticState(trainer.model, trainer.optimizer, sampler, progress)
    state.register_reset_callbacks([progress.on_reset])
    trainer.elastic = progress  # for callers and tests: resets, recovery times
    start = s.epoch

    @hvd.elastic.run
    def train(state: ElasticState) -> None:
        while s.epoch < epochs:
            s.steps_per_epoch = steps_per_epoch()
            if s.batch == 0:
                engine.epoch_begin(s.epoch)
            trainer.model.train()
            acc = trainer._means()
            for batch in loader:
                x, y = trainer._to(batch)
                engine.batch_begin(s.batch)
                loss, out = trainer._step(x, y)
                trainer._record(acc, loss, out, y)
                engine.batch_end({"loss": loss.detach()})
                progress.step_done()
                sampler.record_batch(s.batch, batch_size)
                if progress.should_commit():
                    state.commit()
            engine.epoch_end(acc.means())
            sampler.set_epoch(s.epoch)
            state.commit()
            if s.stop_training:
                break

    train(state)
    engine.train_end()
    return History(history={k: list(v) for k, v in s.history.items()}, epochs_run=s.epoch - start)


