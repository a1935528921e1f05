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
:mod:`hvdkit.tensorflow.horovod_api`) sit beside hvdkit's own (``__all__``).
"""

from hvdkit._imports import require

require("tensorflow", extra="tensorflow")
require("horovod.tensorflow", extra="tensorflow", horovod=True)

from hvdkit.tensorflow import horovod_api as _horovod_api  # noqa: E402
from hvdkit.tensorflow.comm import HorovodComm  # noqa: E402
from hvdkit.tensorflow.data import shard  # noqa: E402
from hvdkit.tensorflow.gradient_tape import DistributedGradientTape  # noqa: E402
from hvdkit.tensorflow.gradients import allreduce_gradients  # noqa: E402
from hvdkit.tensorflow.runtime import init, local_rank, local_size, rank, size  # noqa: E402
from hvdkit.tensorflow.variables import broadcast_variables, to_tf_variables  # noqa: E402

globals().update({_n: getattr(_horovod_api, _n) for _n in _horovod_api.__horovod_all__})
__horovod_all__ = list(_horovod_api.__horovod_all__)


def __getattr__(name: str) -> object:
    """Anything else of ``horovod.tensorflow`` (its internals, e.g. ``hvd.util``, that scripts and upstream's tests
    reach) falls through to Horovod's module, so a Horovod name never fails with AttributeError here."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # an hvdkit submodule not imported yet
        return importlib.import_module(f"{__name__}.{name}")
    import horovod.tensorflow as _upstream

    try:
        return getattr(_upstream, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (nor has horovod.tensorflow)") from None

__all__ = ["DistributedGradientTape", "HorovodComm", "allreduce_gradients", "broadcast_variables", "init",
           "local_rank", "local_size", "rank", "shard", "size", "to_tf_variables"]
