"""Horovod initialisation for TensorFlow/Keras with per-rank CPU threading."""

from __future__ import annotations

import logging
import os

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.core.runtime_defaults import apply_runtime_defaults, threads_per_rank

log = logging.getLogger("hvdkit")


def init(threads: int | None = None) -> None:
    """Initialise Horovod (tuned defaults first) and set TF's thread pools per rank.

    Call it before TensorFlow runs any op: TF fixes its thread pools at the first one.
    ``threads`` (or ``HVDKIT_THREADS``) wins; else threads = available cores / ranks
    on this host, unless ``OMP_NUM_THREADS`` was set by the user.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an integer >= 1 or None, got {threads!r}")
    apply_runtime_defaults()
    hvd.init()
    if threads is None and "HVDKIT_THREADS" not in os.environ and "OMP_NUM_THREADS" in os.environ:
        return
    n = threads if threads is not None else threads_per_rank(hvd.local_size())
    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:
        log.warning("TensorFlow already started: call hvdkit init() before any TF op to set %d threads per rank", n)


def rank() -> int:
    return hvd.rank()


def size() -> int:
    return hvd.size()


def local_rank() -> int:
    return hvd.local_rank()


def local_size() -> int:
    return hvd.local_size()
