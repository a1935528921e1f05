"""The small interface through which the core talks to the other workers.

Adapters pass in a :class:`Comm` backed by Horovod (``hvdkit.torch.HorovodComm``,
``hvdkit.keras``'s); unit tests use :class:`LocalComm`, a one-process world.
Like Horovod's ``common/elastic.py``, the core never imports a framework: it
gets its collectives passed in.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any


class Comm(abc.ABC):
    """Rank and size queries plus the two collectives the core needs."""

    @property
    @abc.abstractmethod
    def rank(self) -> int: ...

    @property
    @abc.abstractmethod
    def size(self) -> int: ...

    @property
    @abc.abstractmethod
    def local_rank(self) -> int: ...

    @property
    @abc.abstractmethod
    def local_size(self) -> int: ...

    @abc.abstractmethod
    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        """Return ``obj`` as held by ``root_rank`` on every rank."""

    @abc.abstractmethod
    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """Average scalar values over all ranks; every rank passes the same keys."""

    @property
    def is_root(self) -> bool:
        return self.rank == 0


class LocalComm(Comm):
    """A single-process world: rank 0 of size 1 (or a pretend size for maths tests)."""

    def __init__(self, size: int = 1) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size!r}")
        self._size = size

    rank = property(lambda self: 0)  # type: ignore[assignment]
    size = property(lambda self: self._size)  # type: ignore[assignment]
    local_rank = property(lambda self: 0)  # type: ignore[assignment]
    local_size = property(lambda self: 1)  # type: ignore[assignment]

    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        return obj

    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        return {k: float(v) for k, v in values.items()}
