"""A :class:`~hvdkit.core.comm.Comm` over any Horovod framework binding; the adapter passes the module
and two tensor converters, so the core stays framework-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hvdkit.core.comm import Comm
from hvdkit.core.hang_report import heartbeat


class HorovodComm(Comm):
    """The core's :class:`Comm` over a Horovod binding (``horovod.torch`` or ``horovod.tensorflow``)."""
    def __init__(self, hvd: Any, to_tensor: Callable[[Sequence[float]], Any],
                 to_list: Callable[[Any], list[float]]) -> None:
        self.hvd = hvd
        self._to_tensor = to_tensor
        self._to_list = to_list

    @property
    def rank(self) -> int:
        """Horovod's rank."""
        return int(self.hvd.rank())

    @property
    def size(self) -> int:
        """Horovod's size."""
        return int(self.hvd.size())

    @property
    def local_rank(self) -> int:
        """Horovod's local rank."""
        return int(self.hvd.local_rank())

    @property
    def local_size(self) -> int:
        """Horovod's local size."""
        return int(self.hvd.local_size())

    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        """Horovod's ``broadcast_object`` from ``root_rank``."""
        out = self.hvd.broadcast_object(obj, root_rank=root_rank, name="hvdkit.broadcast_object")
        heartbeat()
        return out

    def allgather_object(self, obj: object) -> list[Any]:
        """Horovod's ``allgather_object``: every rank's ``obj`` in rank order."""
        out = list(self.hvd.allgather_object(obj, name="hvdkit.allgather_object"))
        heartbeat()
        return out

    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """One allreduce (average) of all the values, in float64."""
        keys = list(values)
        if self.size == 1:
            return {k: float(values[k]) for k in keys}
        out = self.hvd.allreduce(self._to_tensor([float(values[k]) for k in keys]), op=self.hvd.Average,
                                 name="hvdkit.allreduce_mean." + ",".join(keys))
        heartbeat()
        return dict(zip(keys, self._to_list(out)))

