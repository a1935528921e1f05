"""Epoch (and, on request, batch) metrics to a CSV or JSON-lines file, written by rank 0, appended on resume."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.comm import raise_on_every_rank
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_choice, check_int


class MetricsLogger(Callback):
    """Append one row per epoch (epoch, global step, every metric) to ``path``, fsynced, never truncating
    (a resumed run appends). The format follows the suffix (``.csv``/``.jsonl``) unless ``fmt`` says;
    ``path="-"`` prints a line per epoch instead.

    ``batch_every=N`` (JSON lines or ``"-"`` only) also writes a row every ``N`` optimizer steps: ``epoch``,
    ``global_step``, ``batch`` (1-based, in the epoch) and that step's logs (its loss, and ``StepTiming``'s
    figures when it runs). Reading a step's loss waits for that step to finish, hence not every step."""

    order = 200

    def __init__(self, path: str | os.PathLike[str], fmt: str | None = None, batch_every: int = 0) -> None:
        self.stdout = str(path) == "-"
        self.path = Path(path)
        if not self.stdout and self.path.is_dir():
            raise ValueError(f"path must be a file path, got {str(path)!r}, which is a directory")
        guess = "jsonl" if self.path.suffix in (".jsonl", ".json") else "csv"
        self.fmt = check_choice("fmt", fmt or guess, ["csv", "jsonl"])
        self.batch_every = check_int("batch_every", batch_every, minimum=0)
        if self.batch_every and self.fmt == "csv" and not self.stdout:
            raise ValueError(f"batch_every={batch_every} needs JSON lines (a .jsonl path or fmt='jsonl'), got a CSV "
                             f"file {str(path)!r}: batch rows and epoch rows have different columns, and a CSV "
                             "file has one header")
        self._columns: list[str] | None = None
        self._epoch_step0 = 0

    def on_train_begin(self, state: TrainState) -> None:
        """Check, before the first step, that rank 0 can append to ``path``."""
        problem = None
        if state.is_root and not self.stdout:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a"):
                    pass
            except OSError as exc:
                problem = f"MetricsLogger(path={str(self.path)!r}): cannot write it: {exc.strerror or exc}"
        raise_on_every_rank(state.comm, problem, elastic=state.elastic)

    def on_epoch_begin(self, state: TrainState) -> None:
        """Note the epoch's first step (batch rows count from it)."""
        self._epoch_step0 = state.global_step

    def on_batch_end(self, state: TrainState) -> None:
        """Every ``batch_every`` steps, rank 0 appends (or prints) the step's row."""
        step = self._epoch_step0 + state.batch + 1  # steps done; the same in every adapter's batch-end timing
        if not self.batch_every or step % self.batch_every or not state.is_root:
            return
        row: dict[str, Any] = {"epoch": state.epoch + 1, "global_step": step, "batch": state.batch + 1}
        for k, v in state.logs.items():
            try:
                row[k] = float(v)
            except (TypeError, ValueError):
                continue
        if self.stdout:
            metrics = "  ".join(f"{k} {v:.4g}" for k, v in row.items() if k not in ("epoch", "global_step", "batch"))
            print(f"step {step:6d}  {metrics}", flush=True)
            return
        self._append(row)

    def on_epoch_end(self, state: TrainState) -> None:
        """Rank 0 appends (or prints) the epoch's row."""
        if not state.is_root:
            return
        row = {"epoch": state.epoch + 1, "global_step": state.global_step,
               **{k: float(v) for k, v in state.logs.items()}}
        if self.stdout:
            metrics = "  ".join(f"{k} {v:.4f}" for k, v in row.items() if k not in ("epoch", "global_step"))
            print(f"epoch {row['epoch']:3d}/{state.epochs}  {metrics}", flush=True)
            return
        self._append(row)

    def _append(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", newline="") as f:
            if self.fmt == "jsonl":
                f.write(json.dumps(row) + "\n")
            else:
                if self._columns is None:
                    self._columns = self._existing_header() or list(row)
                    if f.tell() == 0:
                        csv.writer(f).writerow(self._columns)
                csv.writer(f).writerow([row.get(c, "") for c in self._columns])
            f.flush()
            os.fsync(f.fileno())

    def _existing_header(self) -> list[str] | None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return None
        with open(self.path, newline="") as f:
            return next(csv.reader(f), None)
