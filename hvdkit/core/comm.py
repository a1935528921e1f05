"""The small interface through which the core talks to the other workers; the core never imports a
framework. Adapters pass a Horovod-backed :class:`Comm`; unit tests use :class:`LocalComm`.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping
from typing import Any


def under_elastic_driver(environ: Mapping[str, str] | None = None) -> bool:
    """True in a worker that Horovod's elastic driver started (``horovodrun --min-np/--max-np``): then
    nothing may broadcast outside the elastic state's sync (horovod#2652). Every adapter asks this."""
    env = os.environ if environ is None else environ
    return env.get("HOROVOD_ELASTIC") == "1"


class Comm(abc.ABC):
    """Rank and size queries plus the two collectives the core needs."""

    @property
    @abc.abstractmethod
    def rank(self) -> int:
        """This worker's rank."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """The number of workers."""

    @property
    @abc.abstractmethod
    def local_rank(self) -> int:
        """This worker's rank on its host."""

    @property
    @abc.abstractmethod
    def local_size(self) -> int:
        """The number of workers on this host."""

    @abc.abstractmethod
    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        """Return ``obj`` as held by ``root_rank`` on every rank."""

    @abc.abstractmethod
    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """Average scalar values over all ranks; every rank passes the same keys."""

    @abc.abstractmethod
    def allgather_object(self, obj: object) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""

    @property
    def is_root(self) -> bool:
        """True on rank 0, the rank that writes files and whose state others receive."""
        return self.rank == 0

    @property
    def elastic(self) -> bool:
        """True when workers may leave and join this run (see :func:`under_elastic_driver`)."""
        return under_elastic_driver()


class LocalComm(Comm):
    """A single-process world of a pretend ``size`` and ``elastic`` mode, for unit tests."""

    def __init__(self, size: int = 1, *, elastic: bool = False) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size!r}")
        self._size = size
        self._elastic = elastic

    @property
    def rank(self) -> int:
        """Always 0."""
        return 0

    @property
    def size(self) -> int:
        """The pretend size."""
        return self._size

    @property
    def local_rank(self) -> int:
        """Always 0."""
        return 0

    @property
    def local_size(self) -> int:
        """Always 1."""
        return 1

    @property
    def elastic(self) -> bool:
        """As given to the constructor."""
        return self._elastic

    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        """``obj`` itself."""
        return obj

    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """The values themselves, as floats."""
        return {k: float(v) for k, v in values.items()}

    def allgather_object(self, obj: object) -> list[Any]:
        """``[obj]``."""
        return [obj]


def raise_on_every_rank(comm: Comm, problem: str | None, *, elastic: bool = False) -> None:
    """Raise rank 0's ``problem`` (a message, or None) as a ValueError on every rank, so none waits in a
    collective for a rank that stopped. Elastic: only rank 0 raises (no broadcast outside the sync)."""
    if not elastic and comm.size > 1:
        problem = comm.broadcast_object(problem, 0)
    if problem is not None:
        raise ValueError(problem)
