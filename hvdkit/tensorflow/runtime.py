"""Horovod initialisation for TensorFlow/Keras with per-rank CPU threading, and the core's Comm over it."""

from __future__ import annotations

import logging
import os
from importlib import metadata
from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.core.horovod_comm import HorovodComm as _HorovodComm
from hvdkit.runtime.startup import start_horovod

log = logging.getLogger("hvdkit")
rank, size, local_rank, local_size = hvd.rank, hvd.size, hvd.local_rank, hvd.local_size


def _set_threads(n: int) -> None:
    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:
        log.warning("TensorFlow already started: call hvdkit init() before any TF op to set %d threads per rank", n)


def init(comm: Any = None, process_sets: Any = None, *, threads: int | None = None,
         timeline: str | os.PathLike[str] | None = None) -> None:
    """As :func:`hvdkit.torch.runtime.init`, setting TF's thread pools per rank. Call it before
    TensorFlow runs any op: TF fixes its thread pools at the first one."""
    try:
        keras_version: str | None = metadata.version("keras")
    except metadata.PackageNotFoundError:  # tf.keras-only installs: nothing to check
        keras_version = None
    # Listing physical devices does not start TF's runtime: the thread pools can still be set.
    start_horovod(hvd, comm=comm, process_sets=process_sets, threads=threads, timeline=timeline,
                  versions={"tensorflow": tf.__version__, "keras": keras_version},
                  on_cpu=lambda: not tf.config.list_physical_devices("GPU"), set_threads=_set_threads)


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.tensorflow``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: tf.constant(xs, dtype=tf.float64), lambda t: t.numpy().tolist())
