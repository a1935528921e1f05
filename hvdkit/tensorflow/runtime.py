"""Horovod initialisation for TensorFlow/Keras with per-rank CPU threading, and the core's Comm over it."""

from __future__ import annotations

import logging
import os
from importlib import metadata
from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.core.horovod_comm import HorovodComm as _HorovodComm
from hvdkit.runtime.env_vars import check_env
from hvdkit.runtime.environments import prepare_process
from hvdkit.runtime.frameworks import warn_if_untested
from hvdkit.runtime.tuning import apply_runtime_defaults, check_comm, check_threads, resolve_threads, timeline_env

log = logging.getLogger("hvdkit")
rank, size, local_rank, local_size = hvd.rank, hvd.size, hvd.local_rank, hvd.local_size


def init(comm: Any = None, process_sets: Any = None, *, threads: int | None = None,
         timeline: str | os.PathLike[str] | None = None) -> None:
    """As :func:`hvdkit.torch.runtime.init`, setting TF's thread pools per rank. Call it before
    TensorFlow runs any op: TF fixes its thread pools at the first one."""
    check_threads(threads)
    check_comm(comm)
    warn_if_untested("tensorflow", tf.__version__)
    try:
        warn_if_untested("keras", metadata.version("keras"))
    except metadata.PackageNotFoundError:  # tf.keras-only installs: nothing to check
        pass
    prepare_process()  # launcher context: SLURM_* -> Horovod's Gloo variables under hvdkit slurm-gloo
    timeline_env(timeline)
    # Listing physical devices does not start TF's runtime: the thread pools can still be set.
    apply_runtime_defaults(cpu=not tf.config.list_physical_devices("GPU"))
    check_env()  # Horovod would take a bad value silently
    hvd.init(comm=comm, process_sets=process_sets)
    n = resolve_threads(threads, hvd.local_size())
    if n is None:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:
        log.warning("TensorFlow already started: call hvdkit init() before any TF op to set %d threads per rank", n)


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.tensorflow``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: tf.constant(xs, dtype=tf.float64), lambda t: t.numpy().tolist())
