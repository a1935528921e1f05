"""The mix-in that puts the elastic loop's snapshot into a Horovod elastic ``State``, so it goes
with every commit, rollback and sync."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from hvdkit.core.elastic.loop import ElasticLoop


class LoopCommit:
    """Mix-in for a Horovod ``ObjectState`` subclass that holds the loop's snapshot as ``hvdkit``.

    Subclasses set ``self._loop`` before calling the ``State``'s ``__init__``.
    """

    _loop: ElasticLoop
    hvdkit: dict[str, Any]

    def save(self) -> None:
        """Commit: take a fresh snapshot, then let Horovod save everything."""
        self.hvdkit = self._loop.snapshot()
        cast(Any, super()).save()

    def restore(self) -> None:
        """A collective failed: back to the last commit (Horovod calls this)."""
        self._loop.failure_noticed()
        cast(Any, super()).restore()
        self._loop.apply(self.hvdkit)

    def sync(self) -> None:
        """After a reset: rank 0's committed state to every worker, new ones included."""
        cast(Any, super()).sync()
        self._loop.apply(self.hvdkit)
