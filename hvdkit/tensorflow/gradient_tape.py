"""A DistributedGradientTape that accepts Keras 3 variables as well as tf.Variables."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from hvdkit.core.collectives import check_reduction
from hvdkit.tensorflow.gradients import allreduce_gradients
from hvdkit.tensorflow.variables import to_tf_variable


class DistributedGradientTape:
    """Wrap a ``tf.GradientTape``: ``gradient()`` returns gradients averaged over all workers.

    Horovod's own ``hvd.DistributedGradientTape`` fails on Keras 3 variables
    (``'Variable' object has no attribute 'ref'``); this one maps them to the
    tf.Variables behind them first, keeps the structure of ``sources``, and
    leaves unconnected sources as ``None``.
    """

    def __init__(self, tape: tf.GradientTape, *, op: str = "average", compression: str = "none") -> None:
        if not isinstance(tape, tf.GradientTape):
            raise TypeError(f"tape must be a tf.GradientTape, got {type(tape).__name__}")
        check_reduction(compression, op)
        self.tape = tape
        self.op, self.compression = op, compression

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None) -> Any:
        """The tape's gradients of ``target`` w.r.t. ``sources``, averaged over workers, in the structure of
        ``sources``."""
        flat = tf.nest.flatten(sources)
        tf_sources = [to_tf_variable(s) if not isinstance(s, tf.Tensor) else s for s in flat]
        grads = self.tape.gradient(target, tf_sources, output_gradients=output_gradients)
        reduced = allreduce_gradients(grads, op=self.op, compression=self.compression, name_prefix="hvdkit.tape")
        return tf.nest.pack_sequence_as(sources, reduced)

    def __getattr__(self, name: str) -> Any:  # watch(), stop_recording(), ... go to the tape
        return getattr(self.tape, name)
