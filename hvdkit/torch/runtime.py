"""Horovod initialisation for PyTorch with sane per-rank CPU threading, and the core's Comm over it."""

from __future__ import annotations

import os
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.horovod_comm import HorovodComm as _HorovodComm
from hvdkit.runtime.startup import start_horovod

rank, size, local_rank, local_size = hvd.rank, hvd.size, hvd.local_rank, hvd.local_size


def init(comm: Any = None, process_sets: Any = None, *, threads: int | None = None,
         timeline: str | os.PathLike[str] | None = None) -> None:
    """Initialise Horovod (tuned defaults first) and set intra-op threads per rank
    (:func:`hvdkit.runtime.tuning.resolve_threads`). ``timeline="path.json"`` records Horovod's
    timeline there. ``comm`` and ``process_sets`` go to Horovod's ``init`` unchanged."""
    start_horovod(hvd, comm=comm, process_sets=process_sets, threads=threads, timeline=timeline,
                  versions={"torch": torch.__version__}, on_cpu=lambda: not torch.cuda.is_available(),
                  set_threads=torch.set_num_threads)


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.torch``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: torch.tensor(xs, dtype=torch.float64), lambda t: t.tolist())
