"""A Keras 3 batch-normalisation layer whose training statistics cover every Horovod worker's batch.

Horovod's ``SyncBatchNormalization`` is a tf.keras 2 layer and fails on Keras 3. This one changes only
the batch moments of ``keras.layers.BatchNormalization``: one (differentiable) allreduce sums every
worker's per-channel sums, squared sums and counts, masked entries left out.

    x = hk.SyncBatchNormalization()(x)       # where keras.layers.BatchNormalization() was
"""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as hvd
import keras
import tensorflow as tf

from hvdkit.core.comm import under_elastic_driver


@keras.saving.register_keras_serializable(package="hvdkit")
class SyncBatchNormalization(keras.layers.BatchNormalization):
    """``keras.layers.BatchNormalization`` with batch statistics over all Horovod workers while training
    (``synchronized`` is for ``tf.distribute`` and must stay False)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("synchronized"):
            raise ValueError("synchronized must be False for hvdkit's SyncBatchNormalization (it is for "
                             "tf.distribute strategies; Horovod does the synchronisation here), got True")
        super().__init__(*args, **kwargs)

    def _moments(self, inputs: Any, mask: Any) -> tuple[Any, Any]:
        if hvd.size() == 1 and not under_elastic_driver():
            return super()._moments(inputs, mask)
        axes = self._reduction_axes
        x = tf.cast(inputs, tf.float32)
        if mask is None:
            total = tf.reduce_sum(x, axes)
            squares = tf.reduce_sum(x * x, axes)
            count = tf.cast(tf.size(x), tf.float32) / tf.cast(tf.size(total), tf.float32) * tf.ones_like(total)
        else:
            keep = tf.cast(tf.broadcast_to(tf.expand_dims(mask, -1), tf.shape(x)), tf.float32)
            total = tf.reduce_sum(x * keep, axes)
            squares = tf.reduce_sum(x * x * keep, axes)
            count = tf.reduce_sum(keep, axes)
        n = tf.size(total)
        summed = hvd.allreduce(tf.concat([tf.reshape(total, [-1]), tf.reshape(squares, [-1]),
                                          tf.reshape(count, [-1])], 0), op=hvd.Sum)
        shape = tf.shape(total)
        count = tf.maximum(tf.reshape(summed[2 * n:], shape), 1.0)
        mean = tf.reshape(summed[:n], shape) / count
        variance = tf.maximum(tf.reshape(summed[n:2 * n], shape) / count - mean * mean, 0.0)
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)
