"""Horovod initialisation for PyTorch with sane per-rank CPU threading."""

from __future__ import annotations

import os

import horovod.torch as hvd
import torch

from hvdkit.core.runtime_defaults import apply_runtime_defaults, threads_per_rank

_user_threads_env = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def init(threads: int | None = None) -> None:
    """Initialise Horovod (tuned defaults first) and set intra-op threads per rank.

    ``threads`` (or ``HVDKIT_THREADS``) wins; else threads = available cores /
    ranks on this host, unless ``OMP_NUM_THREADS`` was set by the user.
    """
    apply_runtime_defaults()
    hvd.init()
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1 or None, got {threads!r}")
        torch.set_num_threads(threads)
    elif "HVDKIT_THREADS" in os.environ or not any(v in os.environ for v in _user_threads_env):
        torch.set_num_threads(threads_per_rank(hvd.local_size()))


def rank() -> int:
    return hvd.rank()


def size() -> int:
    return hvd.size()


def local_rank() -> int:
    return hvd.local_rank()


def local_size() -> int:
    return hvd.local_size()
