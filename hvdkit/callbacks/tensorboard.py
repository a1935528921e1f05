"""TensorBoard scalars from rank 0: loss, metrics, learning rate and throughput, for every adapter."""

from __future__ import annotations

import os
import time
from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.imports import require
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_int


class TensorBoard(Callback):
    """Write TensorBoard event files into ``log_dir`` (rank 0 only; other ranks write nothing).

    Per epoch (step = epoch number, 1-based): every epoch log (``loss``, metrics, ``val_*``; global
    values when ``MetricAverage`` runs before it), ``lr``, ``samples_per_s`` and ``steps_per_s``, under
    ``epoch/``. Per batch, every ``batch_every`` optimizer steps (step = global step): the batch logs,
    ``lr`` and the throughput since the last batch point, under ``batch/``; ``batch_every=0`` writes
    epochs only. Reading a batch's loss waits for that step to finish, hence not every step.

    Samples per second count all ranks: the PyTorch ``Trainer`` reports its global batch; with Keras
    ``model.fit`` pass ``batch_size`` (per rank, as given to ``fit``), otherwise only steps per second
    are written. Events are written with tensorboardX (no TensorFlow or PyTorch needed); open them with
    ``tensorboard --logdir LOG_DIR``.
    """

    order = 90  # after MetricAverage (order 50), so the epoch logs are the averaged ones

    def __init__(self, log_dir: str | os.PathLike[str], batch_every: int = 10, batch_size: int | None = None,
                 flush_secs: int = 30) -> None:
        if not isinstance(log_dir, (str, os.PathLike)) or not str(log_dir):
            raise ValueError(f"log_dir must be a non-empty path, got {log_dir!r}")
        self.log_dir = os.fspath(log_dir)
        self.batch_every = check_int("batch_every", batch_every, minimum=0)
        self.batch_size = None if batch_size is None else check_int("batch_size", batch_size, minimum=1)
        self.flush_secs = check_int("flush_secs", flush_secs, minimum=1)
        self._writer: Any = None
        self._epoch_t0 = self._batch_t0 = 0.0
        self._batch_step0 = self._epoch_step0 = 0

    def on_train_begin(self, state: TrainState) -> None:
        """Open the event file (rank 0); a folder that cannot be written fails here, before any step."""
        if not state.is_root or self._writer is not None:
            return
        require("tensorboardX", extra="tensorboard")
        from tensorboardX import SummaryWriter
        try:
            os.makedirs(self.log_dir, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"TensorBoard(log_dir={self.log_dir!r}) cannot create the folder: "
                                     f"{exc.strerror or exc}") from exc
        if not os.access(self.log_dir, os.W_OK):
            raise PermissionError(f"TensorBoard(log_dir={self.log_dir!r}): the folder is not writable")
        self._writer = SummaryWriter(self.log_dir, flush_secs=self.flush_secs)

    def on_epoch_begin(self, state: TrainState) -> None:
        """Start the epoch's and the first batch point's clocks."""
        self._epoch_t0 = self._batch_t0 = time.perf_counter()
        self._batch_step0 = self._epoch_step0 = state.global_step

    def on_batch_end(self, state: TrainState) -> None:
        """Every ``batch_every`` steps: batch logs, LR and throughput since the last point."""
        w = self._writer
        step = self._epoch_step0 + state.batch + 1  # steps done; the same in every adapter's batch-end timing
        if w is None or not self.batch_every or step % self.batch_every:
            return
        for k, v in state.logs.items():
            w.add_scalar(f"batch/{k}", float(v), step)
        now = time.perf_counter()
        self._scalars(w, "batch", state, steps=step - self._batch_step0, seconds=now - self._batch_t0, step=step)
        self._batch_t0, self._batch_step0 = now, step

    def on_epoch_end(self, state: TrainState) -> None:
        """The epoch's logs, LR and throughput."""
        w = self._writer
        if w is None:
            return
        epoch = state.epoch + 1
        for k, v in state.logs.items():
            w.add_scalar(f"epoch/{k}", float(v), epoch)
        steps = state.steps_per_epoch or 0
        self._scalars(w, "epoch", state, steps=steps, seconds=time.perf_counter() - self._epoch_t0, step=epoch)
        w.flush()

    def _scalars(self, w: Any, prefix: str, state: TrainState, *, steps: int, seconds: float, step: int) -> None:
        if state.last_applied_lr is not None:
            w.add_scalar(f"{prefix}/lr", state.last_applied_lr, step)
        if steps > 0 and seconds > 0:
            w.add_scalar(f"{prefix}/steps_per_s", steps / seconds, step)
            per_step = state.samples_per_step  # the Trainer's global batch, or Keras's from batch_size
            if per_step is None and self.batch_size is not None:
                per_step = self.batch_size * state.comm.size
            if per_step:
                w.add_scalar(f"{prefix}/samples_per_s", per_step * steps / seconds, step)

    def on_train_end(self, state: TrainState) -> None:
        """Flush the event file: the run's scalars are on disk when ``fit`` returns."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Close the event file and its writer thread (also after an error); the next run reopens it."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __repr__(self) -> str:
        return f"TensorBoard({self.log_dir!r}, batch_every={self.batch_every})"
