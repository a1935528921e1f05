"""Interleaved rounds: the compared implementations take turns, A B, B A, A B, ... (A B B A A B ...).

On a shared machine the speed drifts and jumps between modes while a benchmark runs. Measuring one
implementation after the other puts each in a different machine state; alternating them in rounds,
reversing the order every other round, exposes both to the same states, and a drift within a pair of
rounds cancels. Each round then yields one ratio per comparison (``hvdkit.bench.stats``).

Used in two ways: inside one job (the workers alternate epochs or timed bursts with ``order``), and,
where the implementations cannot share a process (different launchers, runtime settings fixed at
start, or process counts), by alternating short jobs (``alternate``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: Where a suite reports progress (one line per message).
Log = Callable[[str], None]


def prefixed(log: Log, suite: str) -> Log:
    """``log`` with every message prefixed by ``suite``."""
    return lambda msg: log(f"{suite}: {msg}")


def order(items: Sequence[T], r: int) -> list[T]:
    """The order of round ``r``: as given on even rounds, reversed on odd ones."""
    return list(items) if r % 2 == 0 else list(reversed(items))


def alternate(jobs: Mapping[str, Callable[[], Any]], rounds: int,
              log: Callable[[str], None] | None = None, first: int = 0) -> tuple[dict[str, list[Any]], list[str]]:
    """Run each of ``jobs`` once per round, in ``order``; return each job's results and the run order.

    ``first``: the index of the first round, for rounds that go on from an earlier call (the order keeps
    alternating across the two)."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    results: dict[str, list[Any]] = {name: [] for name in jobs}
    ran: list[str] = []
    for r in range(first, first + rounds):
        for name in order(list(jobs), r):
            if log is not None:
                log(f"round {r + 1}/{first + rounds}: {name}")
            results[name].append(jobs[name]())
            ran.append(name)
    return results, ran
