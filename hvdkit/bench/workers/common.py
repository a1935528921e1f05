"""Helpers shared by the benchmark workers (no framework imports here)."""

from __future__ import annotations

import json
import os
import statistics


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


def median(xs: list[float]) -> float:
    """The median of ``values``."""
    return float(statistics.median(xs))
