"""Horovod initialisation for TensorFlow/Keras with per-rank CPU threading."""

from __future__ import annotations

import logging
import os

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.runtime.environments import prepare_process
from hvdkit.runtime.tuning import apply_runtime_defaults, check_threads, resolve_threads, timeline_env

log = logging.getLogger("hvdkit")
rank, size, local_rank, local_size = hvd.rank, hvd.size, hvd.local_rank, hvd.local_size


def init(threads: int | None = None, *, timeline: str | os.PathLike[str] | None = None) -> None:
    """Initialise Horovod (tuned defaults first) and set TF's thread pools per rank
    (see :func:`hvdkit.runtime.tuning.resolve_threads`). ``timeline="path.json"`` records Horovod's
    timeline of every collective there (:func:`hvdkit.runtime.tuning.timeline_env`).

    Call it before TensorFlow runs any op: TF fixes its thread pools at the first one.
    """
    check_threads(threads)
    prepare_process()  # launcher context: SLURM_* -> Horovod's Gloo variables under hvdkit slurm-gloo
    timeline_env(timeline)
    apply_runtime_defaults()
    hvd.init()
    n = resolve_threads(threads, hvd.local_size())
    if n is None:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:
        log.warning("TensorFlow already started: call hvdkit init() before any TF op to set %d threads per rank", n)
