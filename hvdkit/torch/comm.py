"""The core's :class:`~hvdkit.core.comm.Comm`, backed by ``horovod.torch``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.comm import Comm


class HorovodComm(Comm):
    rank = property(lambda self: hvd.rank())  # type: ignore[assignment]
    size = property(lambda self: hvd.size())  # type: ignore[assignment]
    local_rank = property(lambda self: hvd.local_rank())  # type: ignore[assignment]
    local_size = property(lambda self: hvd.local_size())  # type: ignore[assignment]

    def broadcast_object(self, obj: Any, root_rank: int = 0) -> Any:
        return hvd.broadcast_object(obj, root_rank=root_rank, name="hvdkit.broadcast_object")

    def allreduce_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        keys = list(values)
        t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
        out = hvd.allreduce(t, op=hvd.Average, name="hvdkit.allreduce_mean." + ",".join(keys))
        return dict(zip(keys, out.tolist()))
