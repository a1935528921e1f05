"""The one recipe every adapter's ``init`` follows: checks, launcher context, tuned defaults, Horovod's
``init``, then intra-op threads per rank. Each adapter passes only what is its framework's own."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from hvdkit.core import hang_report
from hvdkit.core.start_watch import StartWatch
from hvdkit.runtime.env_vars import check_env
from hvdkit.runtime.environments import prepare_process
from hvdkit.runtime.frameworks import warn_if_untested
from hvdkit.runtime.tuning import apply_runtime_defaults, check_comm, check_threads, resolve_threads, timeline_env


def start_horovod(hvd: ModuleType, *, comm: Any, process_sets: Any, threads: int | None,
                  timeline: str | os.PathLike[str] | None, versions: Mapping[str, str | None],
                  on_cpu: Callable[[], bool], set_threads: Callable[[int], None],
                  allgather_object: Callable[[object, str], list[Any]] | None = None) -> None:
    """Initialise Horovod's ``hvd`` module for this process.

    ``versions``: the framework versions to check against the tested range (None: not installed).
    ``on_cpu()``: whether this process trains on the CPU, asked before the framework starts its runtime.
    ``set_threads(n)``: set the framework's intra-op threads to the per-rank share
    (:func:`hvdkit.runtime.tuning.resolve_threads`).
    ``allgather_object(obj, name)``: what the hang report exchanges its reports with, from its own thread
    (default: Horovod's ``allgather_object``).
    """
    check_threads(threads)
    check_comm(comm)
    for name, version in versions.items():
        if version is not None:
            warn_if_untested(name, version)
    launcher = prepare_process()  # launcher context: SLURM_* -> Horovod's Gloo variables under hvdkit slurm-gloo
    timeline_env(timeline)
    apply_runtime_defaults(cpu=on_cpu())
    check_env()  # Horovod would take a bad value silently
    watch = StartWatch(launcher.detail)
    try:
        hvd.init(comm=comm, process_sets=process_sets)
    finally:
        watch.done()
    hang_report.start(hvd.rank, hvd.size, allgather_object or (lambda obj, name: hvd.allgather_object(obj, name=name)),
                      pending=oldest_pending_reader(hvd))
    n = resolve_threads(threads, hvd.local_size())
    if n is not None:
        set_threads(n)


def oldest_pending_reader(hvd: ModuleType) -> Callable[[], tuple[str, float] | None] | None:
    """A function that returns the tensor that has waited longest in Horovod's queue on this process and for
    how many seconds (None when none waits), from the query hvdkit's Horovod build adds
    (``horovod_oldest_pending_tensor``); None for a Horovod build without it."""
    basics = getattr(getattr(hvd, "mpi_ops", None), "_basics", None)
    query = getattr(getattr(basics, "MPI_LIB_CTYPES", None), "horovod_oldest_pending_tensor", None)
    if query is None:
        return None
    query.restype = ctypes.c_double
    query.argtypes = [ctypes.c_char_p, ctypes.c_int]

    def read() -> tuple[str, float] | None:
        name = ctypes.create_string_buffer(512)
        seconds = query(name, len(name))
        return (name.value.decode(errors="replace"), seconds) if seconds >= 0 else None
    return read
