"""TensorFlow adapter for custom training loops (works with Keras 3 variables and tf.Variables).

    import hvdkit.tensorflow as htf
    htf.init()
    htf.broadcast_variables(model.variables + optimizer.variables, root_rank=0)
    with tf.GradientTape() as tape:
        loss = ...
    tape = htf.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)     # averaged over workers

A Horovod 0.28.1 script runs after ``import horovod.tensorflow as hvd`` becomes
``import hvdkit.tensorflow as hvd``: Horovod's names (``__horovod_all__``, from
:mod:`hvdkit.compat.horovod.tensorflow`) sit beside hvdkit's own (``__all__``).
"""

from hvdkit.core.imports import require

require("tensorflow", extra="tensorflow")
require("horovod.tensorflow", extra="tensorflow", horovod=True)

from hvdkit.compat.horovod import export as _export  # noqa: E402
from hvdkit.compat.horovod import tensorflow as _horovod_api  # noqa: E402
from hvdkit.tensorflow.data import shard  # noqa: E402
from hvdkit.tensorflow.gradients import DistributedGradientTape, allreduce_gradients  # noqa: E402
from hvdkit.tensorflow.runtime import (  # noqa: E402
           HorovodComm,
           init,
           local_rank,
           local_size,
           rank,
           size,
)
from hvdkit.tensorflow.variables import broadcast_variables, to_tf_variables  # noqa: E402

__getattr__ = _export(globals(), _horovod_api, "horovod.tensorflow")  # Horovod's names; others: AttributeError

__all__ = ["DistributedGradientTape", "HorovodComm", "allreduce_gradients", "broadcast_variables", "init",
           "local_rank", "local_size", "rank", "shard", "size", "to_tf_variables"]
