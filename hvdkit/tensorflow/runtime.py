"""Horovod initialisation for TensorFlow/Keras with per-rank CPU threading, and the core's Comm over it."""

from __future__ import annotations

import logging
import os
import pickle
from importlib import metadata
from typing import Any

import horovod.tensorflow as hvd
import numpy as np
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
                  on_cpu=lambda: not tf.config.list_physical_devices("GPU"), set_threads=_set_threads,
                  allgather_object=traced_allgather_object)


@tf.function
def _allgather_bytes(size: tf.Tensor, data: tf.Tensor, name: str) -> tuple[tf.Tensor, tf.Tensor]:
    # Arguments, not constants: Grappler would run a collective of constants once, while optimising.
    return (hvd.allgather(size, name=f"{name}.sz", ignore_name_scope=True),
            hvd.allgather(data, name=f"{name}.t", ignore_name_scope=True))


def traced_allgather_object(obj: object, name: str) -> list[object]:
    """Every rank's ``obj`` (a picklable object), through traced allgathers. Eager Horovod ops reach Horovod
    under one name whatever ``name`` they were given, so an eager one from a second thread (the hang report's)
    fails at once, or pairs with another rank's stuck one, while the training thread waits in one; a traced
    op keeps its name."""
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes, gathered = _allgather_bytes(tf.constant([data.size], tf.int32), tf.constant(data), name)
    ends = np.cumsum(sizes.numpy())
    raw = gathered.numpy().tobytes()
    return [pickle.loads(raw[end - n:end]) for end, n in zip(ends, sizes.numpy())]


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.tensorflow``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: tf.constant(xs, dtype=tf.float64), lambda t: t.numpy().tolist())
