"""A Keras 3 batch-normalisation layer whose training statistics cover every Horovod worker's batch, on the
TensorFlow and the PyTorch backend.

Horovod's ``SyncBatchNormalization`` is a tf.keras 2 layer and fails on Keras 3. This one changes only
the batch moments of ``keras.layers.BatchNormalization``: one (differentiable) allreduce sums every
worker's per-channel sums, squared sums and counts, masked entries left out.

    x = hk.SyncBatchNormalization()(x)       # where keras.layers.BatchNormalization() was
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops

from hvdkit.core.comm import under_elastic_driver
from hvdkit.keras.backend import current as _backend


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
        if _backend.size() == 1 and not under_elastic_driver():
            return super()._moments(inputs, mask)
        axes = self._reduction_axes
        x = ops.cast(inputs, "float32")
        if mask is None:
            total = ops.sum(x, axes)
            squares = ops.sum(x * x, axes)
            shape = ops.shape(x)  # entries may be tensors (a batch size unknown while tracing)
            count = ops.cast(math.prod([shape[a] for a in axes]), "float32") * ops.ones_like(total)
        else:
            keep = ops.cast(ops.broadcast_to(ops.expand_dims(mask, -1), ops.shape(x)), "float32")
            total = ops.sum(x * keep, axes)
            squares = ops.sum(x * x * keep, axes)
            count = ops.sum(keep, axes)
        n = math.prod(total.shape)  # the channels: known when the layer is built
        summed = _backend.sum_over_ranks(ops.concatenate([ops.reshape(total, [-1]), ops.reshape(squares, [-1]),
                                                          ops.reshape(count, [-1])], 0),
                                         name=f"hvdkit.sync_batchnorm.{self.name}")
        shape = ops.shape(total)
        count = ops.maximum(ops.reshape(summed[2 * n:], shape), 1.0)
        mean = ops.reshape(summed[:n], shape) / count
        variance = ops.maximum(ops.reshape(summed[n:2 * n], shape) / count - mean * mean, 0.0)
        return ops.cast(mean, inputs.dtype), ops.cast(variance, inputs.dtype)
