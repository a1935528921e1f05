"""The core's Horovod-backed Comm, bound to ``horovod.tensorflow``."""

from __future__ import annotations

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.core.horovod_comm import HorovodComm as _HorovodComm


class HorovodComm(_HorovodComm):
    """The core's Comm over ``horovod.tensorflow``."""
    def __init__(self) -> None:
        super().__init__(hvd, lambda xs: tf.constant(xs, dtype=tf.float64), lambda t: t.numpy().tolist())
