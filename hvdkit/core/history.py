"""What a training run returns, the same in every adapter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class ElasticStats(Protocol):
    """What an elastic run reports (:class:`~hvdkit.core.elastic.loop.ElasticLoop` has it)."""

    resets: int
    recovery_seconds: list[float]


@dataclass
class History:
    """Per-epoch metrics of one run, shaped like Keras's ``History``.

    ``history[name]`` lists the metric's value at the end of each epoch the run trained (after
    :class:`~hvdkit.callbacks.MetricAverage`, the value averaged over workers); ``epoch`` lists
    those epochs (0-based). ``elastic`` is the elastic loop of a ``fit_elastic`` run (its
    ``resets`` and ``recovery_seconds``), ``None`` otherwise.
    """

    history: dict[str, list[float]] = field(default_factory=dict)
    epoch: list[int] = field(default_factory=list)
    elastic: ElasticStats | None = None

    @property
    def epochs_run(self) -> int:
        """How many epochs this run trained (a resumed run counts only its own)."""
        return len(self.epoch)

    def __getitem__(self, key: str) -> list[float]:
        return self.history[key]
