"""Helpers shared by the benchmark workers (no framework imports here)."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from benchmarks.stats import block_ratios, median, quartiles, ratios
from hvdkit.core import Callback

__all__ = ["EpochTimer", "add_delta", "check_warmup", "iterations_for", "median", "model_arguments", "paired_args",
           "paired_ratios", "positive", "quartiles", "sizes_bytes", "thread_sample", "timed_count", "write_result"]


def write_result(path: str, result: dict) -> None:
    """Rank 0 writes ``result`` as JSON to ``path`` (atomically: the driver reads it once the job ends)."""
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


def positive(text: str) -> int:
    """An integer >= 1 (argparse type)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def timed_count(text: str) -> int:
    """An integer >= 2 (argparse type) for epochs or rounds whose first is not timed."""
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be an integer >= 2 (the first is not timed), got {text}")
    return value


def model_arguments(p: argparse.ArgumentParser, steps: int = 20) -> argparse.ArgumentParser:
    """Add what every training worker takes: ``--results``, the compute-bound MLP's sizes, the batch per rank
    and the steps per epoch."""
    p.add_argument("--results", required=True)
    p.add_argument("--batch", type=positive, default=256)
    p.add_argument("--inputs", type=positive, default=512)
    p.add_argument("--hidden", type=positive, default=1024)
    p.add_argument("--steps", type=positive, default=steps, help="per epoch")
    return p


def paired_parser(description: str | None, rounds: int = 8,
                  rounds_help: str = "epochs of each; the first round is not timed",
                  warmup: int | None = None) -> argparse.ArgumentParser:
    """The arguments every paired-round worker takes: the model, the batches and how many rounds; with
    ``warmup``, also ``--warmup`` (that many untimed rounds by default; check it with :func:`check_warmup`)."""
    p = model_arguments(argparse.ArgumentParser(description=description))
    p.add_argument("--rounds", type=timed_count, default=rounds, help=rounds_help)
    if warmup is not None:
        p.add_argument("--warmup", type=int, default=warmup, help=f"untimed rounds ({warmup}: one in each order)")
    return p


def paired_ratios(a: list[float], b: list[float]) -> dict[str, Any]:
    """The ratios of two loops' timed epochs, alternating in ABBA order: ``ratios`` one per round,
    ``block_ratios`` one per block of two consecutive rounds, one in each order (``stats.block_ratios``),
    and the median and quartiles of the blocks (what the bench judges)."""
    blocks = block_ratios(a, b)
    return {"ratios": ratios(a, b), "block_ratios": blocks, "ratio_median": median(blocks),
            "ratio_quartiles": quartiles(blocks)}


def check_warmup(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``args``, once ``--warmup`` leaves at least two rounds timed (one block of two, ``stats.block_ratios``);
    otherwise argparse's usage error."""
    if not 0 <= args.warmup <= args.rounds - 2:
        p.error(f"argument --warmup: must be an integer from 0 to --rounds - 2 ({args.rounds - 2}: two rounds, one "
                f"in each order, timed), got {args.warmup}")
    return args


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


def thread_sample() -> dict[str, list[float]]:
    """Per thread name: [CPU ms, involuntary context switches, threads] of this process (Linux).

    Python threads go by their Python name (``MainThread``, ``ThreadPoolExecutor`` for Keras's callback
    dispatch); native ones by their OS name (``tf_*`` TensorFlow's pools; ``python`` for threads started in
    C++ without a name: Horovod's background thread, Open MPI's)."""
    import threading

    py_names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, list[float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = py_names.get(int(tid)) or f.read().strip()
            with open(f"/proc/self/task/{tid}/sched") as f:
                fields = {k.strip(): v for k, v in (line.split(":", 1) for line in f if ":" in line)}
        except OSError:  # the thread ended
            continue
        row = out.setdefault(name.split("-")[0].rstrip("0123456789_") or name, [0.0, 0.0, 0])
        row[0] += float(fields["se.sum_exec_runtime"])
        row[1] += float(fields["nr_involuntary_switches"])
        row[2] += 1
    return out


def add_delta(total: dict[str, list[float]], before: dict[str, list[float]], after: dict[str, list[float]]) -> None:
    """Accumulate ``after - before`` (CPU ms, involuntary switches) into ``total``; threads: the max seen."""
    for name, (cpu, inv, n) in after.items():
        b = before.get(name, [0.0, 0.0, 0])
        row = total.setdefault(name, [0.0, 0.0, 0])
        row[0] += cpu - b[0]
        row[1] += inv - b[1]
        row[2] = max(row[2], n)
