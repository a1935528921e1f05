"""Horovod initialisation for PyTorch with sane per-rank CPU threading, and the core's Comm over it."""

from __future__ import annotations

import os
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.horovod_comm import HorovodComm as _HorovodComm
from hvdkit.runtime.env_vars import check_env
from hvdkit.runtime.environments import prepare_process
from hvdkit.runtime.frameworks import warn_if_untested
from hvdkit.runtime.tuning import apply_runtime_defaults, check_comm, check_threads, resolve_threads, timeline_env

rank, size, local_rank, local_size = hvd.rank, hvd.size, hvd.local_rank, hvd.local_size


def init(comm: Any = None, process_sets: Any = None, *, threads: int | None = None,
         timeline: str | os.PathLike[str] | None = None) -> None:
    """Initialise Horovod (tuned defaults first) and set intra-op threads per rank
    (:func:`hvdkit.runtime.tuning.resolve_threads`). ``timeline="path.json"`` records Horovod's
    timeline there. ``comm`` and ``process_sets`` go to Horovod's ``init`` unchanged."""
    check_threads(threads)
    check_comm(comm)
    warn_if_untested("torch", torch.__version__)
    prepare_process()  # launcher context: SLURM_* -> Horovod's Gloo variables under hvdkit slurm-gloo
    timeline_env(timeline)
    apply_runtime_defaults(cpu=not torch.cuda.is_available())
    check_env()  # Horovod would take a bad value silently
    hvd.init(comm=comm, process_sets=process_sets)
    n = resolve_threads(threads, hvd.local_size())
    if n is not None:
        torch.set_num_threads(n)


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.torch``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: torch.tensor(xs, dtype=torch.float64), lambda t: t.tolist())
