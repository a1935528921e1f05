"""Per-round statistics of a comparison: median, interquartile range (IQR) and the verdict against a target.

Every suite of ``hvdkit bench`` compares implementations in rounds (``hvdkit.bench.rounds``) and
computes one value per round (a ratio of the two implementations measured in that round). A target is
judged on the spread of those values, not on one number: it is ``met`` when the whole IQR lies on the
good side of the goal, ``MISSED`` when the whole IQR lies on the bad side, and ``UNCLEAR`` when the IQR
contains the goal (the machine's noise is larger than the distance to the target).

Quartiles use linear interpolation between order statistics (``statistics.quantiles(...,
method="inclusive")``, numpy's default): they always lie inside the measured values.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

UNCLEAR = "UNCLEAR (spread crosses target)"


def median(xs: Sequence[float]) -> float:
    """The median of ``xs``."""
    if not xs:
        raise ValueError("median of no values")
    return float(statistics.median(xs))


def quartiles(xs: Sequence[float]) -> list[float]:
    """The first and third quartiles of ``xs`` (inclusive method; both the value itself for a single one)."""
    if not xs:
        raise ValueError("quartiles of no values")
    if len(xs) == 1:
        return [float(xs[0])] * 2
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [float(q[0]), float(q[2])]


def ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Per-round ratios ``a[i] / b[i]`` of two implementations measured in the same rounds."""
    if len(a) != len(b):
        raise ValueError(f"per-round values must pair up, got {len(a)} and {len(b)} rounds")
    return [x / y for x, y in zip(a, b)]


def block_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """One ratio per block of two consecutive rounds, ``(a[i] + a[i+1]) / (b[i] + b[i+1])`` for even ``i``.

    For comparisons alternating in ABBA order inside one job: a block holds one round in each order, so
    which of the two ran first cancels, and each value sums two epochs of each. Measured on the adapter
    overhead's 2-process job, this narrowed the IQR of the values from 0.046-0.053 (one ratio per round)
    to 0.028-0.030, both for hvdkit vs raw Horovod and for the raw loop against itself (docs/benchmarks.md,
    "Blocks of two rounds"). An odd last round is left out.
    """
    if len(a) != len(b):
        raise ValueError(f"per-round values must pair up, got {len(a)} and {len(b)} rounds")
    if len(a) < 2:
        raise ValueError(f"a block needs two rounds, got {len(a)}")
    return [(a[i] + a[i + 1]) / (b[i] + b[i + 1]) for i in range(0, len(a) - 1, 2)]


def verdict(measured: float | None, iqr: Sequence[float] | None, goal: float | None,
            lower_is_better: bool = False) -> str:
    """``met``, ``MISSED`` or ``UNCLEAR`` from the IQR against ``goal``; ``reported`` without a goal.

    Without an IQR (a single value), the value itself is both quartiles.
    """
    if goal is None or measured is None:
        return "reported"
    lo, hi = (measured, measured) if iqr is None else (iqr[0], iqr[1])
    if lower_is_better:
        good, bad = hi <= goal, lo > goal
    else:
        good, bad = lo >= goal, hi < goal
    return "met" if good else "MISSED" if bad else UNCLEAR


def target(text: str, values: Sequence[float], goal: float | None, lower_is_better: bool = False) -> dict[str, Any]:
    """A target of a suite: its per-round ``values``, their median and IQR, and the ``goal``."""
    vals = [float(v) for v in values]
    return {"target": text, "measured": median(vals), "iqr": quartiles(vals), "rounds": len(vals), "values": vals,
            "goal": goal, "lower_is_better": lower_is_better}


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, IQR and the values themselves (JSON-ready)."""
    vals = [float(v) for v in values]
    return {"median": median(vals), "iqr": quartiles(vals), "values": vals}
