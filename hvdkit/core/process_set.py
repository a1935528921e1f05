"""Scope the core's collectives to a Horovod process set (hybrid parallelism).

A callback given ``process_set=`` talks only to that set's ranks through :func:`scoped`: ranks, sizes
and roots are relative to the set and results hold its values alone, so two pipeline stages can
average different metrics and write different checkpoint folders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hvdkit.core.comm import Comm


def check_process_set(process_set: object) -> Any:
    """``process_set`` if it is None or looks like a Horovod ``ProcessSet``, else a ValueError."""
    if process_set is None:
        return None
    if not (hasattr(process_set, "ranks") and callable(getattr(process_set, "included", None))):
        raise ValueError("process_set must be None or a Horovod ProcessSet (hvd.init(process_sets=[...]) or "
                         f"hvd.add_process_set([...])), got {process_set!r}")
    return process_set


class ProcessSetComm(Comm):
    """A :class:`Comm` over one Horovod process set, for the callbacks' small exchanges.

    Each exchange is one allgather over ``parent`` (the world; every rank fires the same callback
    events): Horovod 0.28.1's object collectives on a process set intermittently fail with "process set
    ... has not been registered". Training tensors still go over the process sets.
    """

    def __init__(self, parent: Comm, process_set: Any) -> None:
        ranks = sorted(int(r) for r in process_set.ranks)
        if parent.rank not in ranks:
            raise ValueError(f"process_set {process_set!r} does not include this process (rank {parent.rank}): "
                             "give each rank a process set it belongs to")
        self.parent, self.process_set, self.ranks = parent, process_set, ranks

    @property
    def rank(self) -> int:
        """This process's rank within the set."""
        return self.ranks.index(self.parent.rank)

    @property
    def size(self) -> int:
        """The number of processes in the set."""
        return len(self.ranks)

    @property
    def local_rank(self) -> int:
        """The parent's local rank (host placement does not change with the set)."""
        return self.parent.local_rank

    @property
    def local_size(self) -> int:
        """The parent's local size."""
        return self.parent.local_size

    @property
    def elastic(self) -> bool:
        """As the parent."""
        return self.parent.elastic

    def allgather_object(self, obj: object) -> list[Any]:
        """Every set member's ``obj``, in set order (every rank of the world takes part)."""
        everyone = self.parent.allgather_object(obj)
        return [everyone[r] for r in self.ranks]

    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        """``obj`` as held by the set's ``root_rank``-th member (a rank within the set)."""
        return self.allgather_object(obj)[root_rank]

    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """The mean over the set of each value."""
        gathered = self.allgather_object({k: float(v) for k, v in values.items()})
        return {k: sum(g[k] for g in gathered) / len(gathered) for k in values}


def scoped(comm: Comm, process_set: Any) -> Comm:
    """``comm`` itself for ``process_set=None``; else a :class:`ProcessSetComm` over the same Horovod binding."""
    if process_set is None:
        return comm
    return ProcessSetComm(comm, process_set)
