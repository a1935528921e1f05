"""Average gradients over workers with Horovod (dense, IndexedSlices and None alike)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.core.collectives import horovod_reduction
from hvdkit.core.comm import under_elastic_driver

_XLA_MESSAGE = (
    "Horovod ops cannot run inside an XLA-compiled function: hvdkit's Horovod build leaves out "
    "xla_mpi_ops.cc (it does not compile against TensorFlow >= 2.16). Compile the model with "
    "jit_compile=False (on a GPU, Keras's jit_compile='auto' resolves to True), or drop jit_compile=True "
    "from the tf.function that computes the gradients."
)


def in_xla_context() -> bool:
    """True while tracing a function that XLA will compile."""
    try:
        from tensorflow.python.framework import ops as tf_ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - private API moved
        return False
    if tf.executing_eagerly():
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph()))


def allreduce_gradients(grads: Sequence[Any], *, op: str = "average", compression: str = "none",
                        name_prefix: str = "hvdkit.grad") -> list[Any]:
    """Allreduce every gradient (``None`` stays ``None``); raises a clear error under XLA."""
    compressor, reduce_op = horovod_reduction(hvd, compression, op)
    if hvd.size() == 1 and not under_elastic_driver():
        # Decided when the step is traced: under elastic training a worker that traced alone
        # must still allreduce once others join (Horovod then averages by the size at run time).
        return list(grads)
    if in_xla_context():
        raise RuntimeError(_XLA_MESSAGE)
    out: list[Any] = []
    for i, g in enumerate(grads):
        if g is None:
            out.append(None)
            continue
        out.append(hvd.allreduce(g, op=reduce_op, compression=compressor, name=f"{name_prefix}.{i}"))
    return out
