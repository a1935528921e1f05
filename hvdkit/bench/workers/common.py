"""Helpers shared by the benchmark workers (no framework imports here)."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from hvdkit.bench.stats import median, quartiles
from hvdkit.core import Callback

__all__ = ["EpochTimer", "iterations_for", "median", "paired_args", "quartiles", "sizes_bytes", "write_result"]


def write_result(path: str, result: dict) -> None:
    """Rank 0 writes ``result`` as JSON to ``path``."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, path)


def sizes_bytes(min_kib: int, max_mib: int) -> list[int]:
    """4 KiB, 16 KiB, ... up to max_mib MiB (powers of 4)."""
    out, n = [], min_kib * 1024
    while n <= max_mib * 1024 * 1024:
        out.append(n)
        n *= 4
    return out


def iterations_for(nbytes: int, budget_bytes: int = 256 * 1024 * 1024, lo: int = 5, hi: int = 200) -> int:
    """How many timed repetitions a message of ``nbytes`` gets."""
    return max(lo, min(hi, budget_bytes // max(nbytes, 1)))


def paired_parser(description: str | None, rounds: int = 8,
                  rounds_help: str = "epochs of each; the first round is not timed") -> argparse.ArgumentParser:
    """The arguments every paired-round worker takes: the model, the batches and how many rounds."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--results", required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--inputs", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20, help="per epoch")
    p.add_argument("--rounds", type=int, default=rounds, help=rounds_help)
    return p


def paired_args(description: str) -> argparse.Namespace:
    """The parsed :func:`paired_parser` arguments, for workers that need no others."""
    return paired_parser(description).parse_args()


class EpochTimer(Callback):
    """Appends each epoch's wall time to ``times[key]``."""

    def __init__(self, times: dict[str, list[float]], key: str) -> None:
        self.times, self.key = times, key

    def on_epoch_begin(self, state: Any) -> None:
        """Start the clock."""
        self.t0 = time.perf_counter()

    def on_epoch_end(self, state: Any) -> None:
        """Record the epoch's time."""
        self.times[self.key].append(time.perf_counter() - self.t0)
