"""A small PyTorch training loop that fires hvdkit's shared callbacks.

For a hand-written loop, drive the same :class:`~hvdkit.core.engine.Engine` the trainer uses (its
docstring shows the calls), with ``HorovodComm()`` and ``TorchOps(model, optimizer)``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader

from hvdkit.callbacks.progress import ProgressBar
from hvdkit.core.callback import Callback
from hvdkit.core.deprecation import reject_unknown, renamed_kwarg
from hvdkit.core.engine import Engine
from hvdkit.core.history import History
from hvdkit.core.numerics import NonFiniteGuard
from hvdkit.core.state import TrainState
from hvdkit.core.types import Logs
from hvdkit.core.validation import check_bool, check_int, check_number
from hvdkit.torch.batch_means import BatchMeans
from hvdkit.torch.data import training_loader
from hvdkit.torch.distribute import distribute, is_distributed, start_alike
from hvdkit.torch.evaluation import Evaluation, MetricFn
from hvdkit.torch.ops import TorchOps
from hvdkit.torch.optimizer import torch_compatible
from hvdkit.torch.precision import Precision
from hvdkit.torch.runtime import HorovodComm
from hvdkit.torch.update import Update

log = logging.getLogger("hvdkit")


def accuracy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Fraction of rows whose arg-max equals the target class."""
    return (outputs.argmax(dim=1) == targets).float().mean()


class Trainer:
    """Train ``model`` with ``optimizer`` and ``loss_fn`` across Horovod workers.

    ``optimizer`` may be a plain torch optimizer (it is then wrapped by
    :func:`hvdkit.torch.distribute`, broadcasting the initial state from rank 0)
    or one that ``distribute`` already returned. ``metrics`` maps names to
    functions of (outputs, targets) giving a batch mean.

    ``accumulate_steps=k`` accumulates the gradients of ``k`` micro-batches (each loss divided by
    ``k``) and communicates and steps once: one allreduce per ``k`` batches (Horovod's
    ``backward_passes_per_step``), the same update as one batch ``k`` times larger. Steps, the LR
    warm-up, schedules and ``steps_per_epoch`` count optimizer steps; an epoch's last
    ``len(loader) % k`` batches are left out, with a warning.

    ``precision``: ``"32"`` (default), ``"bf16"`` (forward under ``torch.autocast`` in bfloat16) or
    ``"fp16"`` (autocast in float16 plus a loss scaler synchronised with Horovod: a step where any rank's
    gradients overflow is skipped on every rank). See :mod:`hvdkit.torch.precision`.

    ``nonfinite`` (with an optimizer distributed for Adasum: checked on the losses, after the update, and not
    ``"skip"``): what a step whose averaged gradients, or some rank's loss, hold a NaN or an inf does,
    on every rank alike: ``"stop"`` (default: raise :class:`~hvdkit.core.numerics.NonFiniteError` before
    the update, naming the step and the ranks whose loss was not finite), ``"skip"`` (no update;
    ``trainer.skipped_steps`` counts them) or ``"warn"`` (apply it, with a warning). Under ``"fp16"`` the
    loss scaler skips steps whose gradients overflow, and the loss is not checked. A checkpoint is never
    written from non-finite weights.

    ``clip_grad_norm``: clip the averaged gradients to this total 2-norm before each update
    (``torch.nn.utils.clip_grad_norm_``; under ``"fp16"`` after the loss scaler's ``unscale_``). Default: no clip.

    ``progress``: hvdkit's tqdm bar on rank 0. The default (None) shows it when rank 0's stderr is a
    terminal and not otherwise (logs and CI stay clean); True or False force it. A ``ProgressBar`` in
    ``callbacks`` is used as given.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *,
                 callbacks: Iterable[Callback] = (), metrics: Mapping[str, MetricFn] | None = None,
                 device: str | torch.device | None = None, accumulate_steps: int = 1,
                 progress: bool | None = None, precision: str = "32", nonfinite: str = "stop",
                 clip_grad_norm: float | None = None) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable, got {loss_fn!r}")
        self.device = torch.device(device) if device is not None else next(
            (p.device for p in model.parameters()), torch.device("cpu"))
        self.model = model
        self.precision = Precision(precision, self.device)
        self.accumulate_steps = check_int("accumulate_steps", accumulate_steps, minimum=1)
        self._guard = NonFiniteGuard(nonfinite)
        self.clip_grad_norm = None if clip_grad_norm is None else check_number(
            "clip_grad_norm", clip_grad_norm, minimum=0.0, strict_min=True)
        if not is_distributed(optimizer):
            optimizer = distribute(model, optimizer, accumulate_steps=accumulate_steps)
        elif not getattr(optimizer, "_hvdkit_started", False):
            # Horovod's own DistributedOptimizer: zero_grad(set_to_none=...), channels_last, ... as distribute's;
            # and it broadcasts nothing: start every rank from rank 0's state, as distribute does
            optimizer = torch_compatible(optimizer)
            process_set: Any = getattr(optimizer, "process_set", None)
            if getattr(process_set, "process_set_id", 0) == 0:  # the world's
                process_set = None
            start_alike(model, optimizer, 0 if process_set is None else min(process_set.ranks), process_set)
        passes = getattr(optimizer, "backward_passes_per_step", 1)  # Horovod's optimizer keeps its own name
        if passes != accumulate_steps:
            raise ValueError(f"accumulate_steps={accumulate_steps} needs an optimizer that communicates once every "
                             f"{accumulate_steps} backward passes, got one distributed with accumulate_steps="
                             f"{passes}; pass the plain optimizer, or distribute(..., accumulate_steps="
                             f"{accumulate_steps})")
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.metrics = dict(metrics or {})
        for name, fn in self.metrics.items():
            if not callable(fn):
                raise TypeError(f"metrics[{name!r}] must be callable, got {fn!r}")
        self.comm = HorovodComm()
        self._update = Update(optimizer, self.precision, self._guard, self.clip_grad_norm, self.comm)
        self._evaluation = Evaluation(self)
        callbacks = list(callbacks)
        if progress is not None:
            check_bool("progress", progress)
        show = sys.stderr.isatty() if progress is None else progress
        if show and self.comm.rank == 0 and not any(isinstance(c, ProgressBar) for c in callbacks):
            callbacks.append(ProgressBar())
        self.engine = Engine(self.comm, TorchOps(model, self.optimizer, self.precision), callbacks)

    @property
    def state(self) -> TrainState:
        """The engine's training state (epoch, step, LR, logs, history)."""
        return self.engine.state

    def validation_problem(self, data: Any, batch_size: int | None) -> str | None:
        """Why ``validation_data`` cannot be evaluated (one forward pass on its first batch), or None."""
        return self._evaluation.problem(data, batch_size)

    def fit(self, train_data: Any, epochs: int, *, batch_size: int | None = None, validation_data: Any = None,
            shuffle: bool = True, seed: int = 0, drop_last: bool = False, **deprecated: Any) -> History:
        """Train for ``epochs`` epochs (continuing from a resumed checkpoint's epoch) and return the history.

        ``train_data``: a Dataset (sharded over ranks with ``batch_size`` per rank,
        reshuffled each epoch from ``seed``) or a DataLoader the caller sharded. ``validation_data`` is
        evaluated after each epoch (exact over ranks, between ``on_eval_begin`` and ``on_eval_end``); its
        results join the epoch's logs as ``val_<name>``.
        """
        val_data = renamed_kwarg("fit", deprecated, "val_data", "validation_data", validation_data, None)
        reject_unknown("fit", deprecated)
        epochs = check_int("epochs", epochs, minimum=1)
        loader = training_loader(train_data, batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last)
        sampler = getattr(loader, "sampler", None)
        engine, state = self.engine, self.engine.state
        steps = self._steps_per_epoch(len(loader))
        if loader.batch_size is not None:
            state.samples_per_step = loader.batch_size * self.accumulate_steps * self.comm.size
            state.global_batch = {"world_size": self.comm.size, "batch_size": loader.batch_size,
                                  "accumulate_steps": self.accumulate_steps}
        val_problem = None if val_data is None else self.validation_problem(val_data, batch_size)
        # Every rank checks the others have as many batches and validation data too (one allgather).
        engine.resumes_mid_epoch = True
        engine.train_begin(epochs, steps_per_epoch=steps,
                           agree={"validation data": "none" if val_data is None else (val_problem or "given")})
        start, done_steps = state.epoch, state.batch  # a checkpoint written on a stop signal ends mid-epoch
        try:
            if val_problem is not None:
                raise ValueError(val_problem)
            if start >= epochs and state.is_root:
                log.warning("fit(epochs=%d): training is already at epoch %d (a resumed checkpoint or an earlier "
                            "fit), so there is nothing to train; pass a larger epochs to train on", epochs, start)
            for epoch in range(start, epochs):
                set_epoch = getattr(sampler, "set_epoch", None)
                if set_epoch is not None:
                    set_epoch(epoch)
                engine.epoch_begin(epoch)
                logs = self.train_batches(loader, engine.batch_begin, lambda i, step_logs: engine.batch_end(step_logs),
                                           skip=done_steps if epoch == start else 0)
                if val_data is not None:
                    logs = self.validate(val_data, batch_size, logs)
                engine.epoch_end(logs)
                if state.stop_training:
                    break
        finally:
            engine.train_end()
        return History(history={k: list(v) for k, v in state.history.items()}, epoch=list(range(start, state.epoch)))

    def _steps_per_epoch(self, batches: int) -> int:
        """Optimizer steps in an epoch of ``batches`` micro-batches (checked: at least one)."""
        k = self.accumulate_steps
        if batches < k:
            raise ValueError(f"accumulate_steps={k} needs at least {k} batches per epoch, got {batches}")
        if batches % k and self.comm.rank == 0:
            log.warning("accumulate_steps=%d: the last %d of %d batches of each epoch do not fill an optimizer "
                        "step and are left out", k, batches % k, batches)
        return batches // k

    def train_batches(self, loader: DataLoader, begin: Callable[[int], None],
                       end: Callable[[int, Logs], None], skip: int = 0) -> dict[str, float]:
        """Train one pass over ``loader``, calling ``begin(i)``/``end(i, logs)`` around optimizer step ``i``
        (``accumulate_steps`` batches each); return the mean loss and metrics (fit's epochs and the
        elastic loop's steps both run here). The first ``skip`` steps' batches are read, not trained on
        (they were before a resumed checkpoint; its metrics cover the rest of the epoch)."""
        self.model.train()
        acc = self._evaluation.means()
        k = self.accumulate_steps
        rng = torch.get_rng_state() if skip else None
        batches = iter(loader)
        if skip > len(loader) // k:  # a resumed step count no longer fits this run's epoch: say so, not StopIteration
            raise ValueError(f"the checkpoint resumes after step {skip} of epoch {self.engine.state.epoch}, but this "
                             f"run's epoch has {len(loader) // k} steps: the training data changed since it was "
                             "written; resume with the same data, or start a fresh run")
        if rng is not None:
            for _ in range(skip * k):
                next(batches)
            torch.set_rng_state(rng)  # the checkpoint's RNG state already follows the loader's draws
        for i in range(skip, len(loader) // k):
            begin(i)
            self.optimizer.zero_grad(set_to_none=True)
            total = None
            for _ in range(k):
                x, y = self._evaluation.to_device(next(batches))
                loss, out = self._backward(x, y, k)
                self._record(acc, loss, out, y)
                total = loss.detach() if total is None else total + loss.detach()
            assert total is not None
            self._update(total, self.engine.state)
            end(i, {"loss": total / k})
        return acc.means()

    @property
    def skipped_steps(self) -> int:
        """Steps skipped on every rank: non-finite gradients (``nonfinite="skip"``) or an fp16 overflow."""
        return self._guard.skipped_steps + self.precision.skipped_steps

    def _record(self, acc: BatchMeans, loss: torch.Tensor, out: torch.Tensor, y: torch.Tensor) -> None:
        if not self.metrics:  # no grad-mode switch: it is most of this call's cost
            acc.add([loss.detach()], len(y))
            return
        with torch.no_grad():
            acc.add([loss.detach()] + [fn(out, y) for fn in self.metrics.values()], len(y))

    def _backward(self, x: torch.Tensor, y: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward of one micro-batch, its gradient weighted ``1/k``; returns loss and outputs."""
        with self.precision.autocast():
            out = self.model(x)
            loss = self.loss_fn(out, y)
        self.precision.backward(loss / k if k > 1 else loss)
        return loss, out

    def validate(self, data: Any, batch_size: int | None, logs: Mapping[str, float]) -> dict[str, float]:
        """Evaluate ``data`` between ``on_eval_begin`` and ``on_eval_end``; ``logs`` plus ``val_*``."""
        self.engine.eval_begin(logs)
        return self.engine.eval_end({f"val_{k}": v for k, v in self.evaluate(data, batch_size=batch_size).items()})

    def evaluate(self, data: Any, *, batch_size: int | None = None) -> dict[str, float]:
        """Loss and metrics over the whole of ``data``, exact across ranks (disjoint, unpadded shards)."""
        return self._evaluation.run(data, batch_size)
