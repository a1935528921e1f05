"""Per-round statistics of a comparison: median, interquartile range (IQR) and the verdict against a target.

Every suite compares implementations in alternating rounds (``benchmarks.jobs.alternate``) and computes one
value per round: a ratio of the two implementations measured in that round. pyperf's statistics describe
one benchmark's timings, not a ratio of two multi-process jobs paired round by round, so this small module
does that. A target is ``met`` when the whole IQR lies on the good side of the goal, ``MISSED`` when it lies
on the bad side, ``UNCLEAR`` when it contains the goal (the machine's noise is larger than the distance).

Quartiles are the inclusive kind (``statistics.quantiles(..., method="inclusive")``, numpy's default): they
always lie inside the measured values.
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
    which of the two ran first cancels, and each value sums two epochs of each (docs/benchmarks.md,
    "Method"). An odd last round is left out.
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


#: Untimed rounds at the start of the two overhead jobs (adapter, Keras fit vs tape), one in each order:
#: their first round ran slow in every run (docs/benchmarks.md, "Method").
PAIRED_WARMUP = 2


def in_job_rounds(rounds: int) -> int:
    """Rounds of the comparisons that alternate epochs inside one job: a round there costs seconds."""
    return 3 * rounds


def paired_rounds(rounds: int) -> int:
    """Rounds of the two overhead jobs: :data:`PAIRED_WARMUP`, then ``in_job_rounds(rounds)`` blocks of two."""
    return PAIRED_WARMUP + 2 * in_job_rounds(rounds)


def runs_summary(per: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each training job's median samples/s and ms/step over its rounds, and the per-round results."""
    out = {}
    for name, jobs in per.items():
        ms = [j["ms_per_step"] for j in jobs]
        out[name] = {"samples_per_s": median([j["samples_per_s"] for j in jobs]), "ms_per_step": median(ms),
                     "ms_per_step_iqr": quartiles(ms), "rounds": jobs}
    return out


def samples_per_s(per: dict[str, list[dict[str, Any]]], name: str) -> list[float]:
    """Job ``name``'s samples/s, one per round."""
    return [j["samples_per_s"] for j in per[name]]
