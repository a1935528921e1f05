"""The core's Horovod-backed Comm, bound to ``horovod.torch``."""

from __future__ import annotations

import horovod.torch as hvd
import torch

from hvdkit.core.horovod_comm import HorovodComm as _HorovodComm


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.torch``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: torch.tensor(xs, dtype=torch.float64), lambda t: t.tolist())
