"""Average gradients over workers with Horovod (dense, IndexedSlices and None alike)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf

from hvdkit.core.collectives import resolve_reduction
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


def allreduce_gradients(grads: Sequence[Any], *, op: Any = "average", compression: Any = "none",
                        name_prefix: str = "hvdkit.grad", prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0, process_set: Any = None, sparse_as_dense: bool = False,
                        device_dense: str = "", device_sparse: str = "", groups: int | None = None) -> list[Any]:
    """Allreduce every gradient (``None`` stays ``None``); raises a clear error under XLA. ``op`` and
    ``compression`` take hvdkit's names or Horovod's objects; ``groups=k``: ``k`` grouped allreduces."""
    compressor, reduce_op = resolve_reduction(hvd, compression, op)
    process_set = hvd.global_process_set if process_set is None else process_set
    if process_set.size() == 1 and not under_elastic_driver():
        # Decided at trace time: under elastic training a worker that traced alone must still
        # allreduce once others join.
        return list(grads)
    if in_xla_context():
        raise RuntimeError(_XLA_MESSAGE)
    present = [i for i, g in enumerate(grads) if g is not None]
    values = [grads[i] for i in present]
    if sparse_as_dense:
        values = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in values]
    kw = {"op": reduce_op, "prescale_factor": prescale_factor, "postscale_factor": postscale_factor,
          "process_set": process_set}
    if groups and all(not isinstance(g, tf.IndexedSlices) for g in values):
        reduced: list[Any] = []
        size = -(-len(values) // groups)
        for k in range(0, len(values), size):
            reduced += hvd.grouped_allreduce(values[k:k + size], compression=compressor, device_dense=device_dense,
                                             device_sparse=device_sparse, **kw)
    else:
        reduced = [hvd.allreduce(g, compression=compressor, name=f"{name_prefix}.{i}", device_dense=device_dense,
                                 device_sparse=device_sparse, **kw) for i, g in zip(present, values)]
    result: list[Any] = [None] * len(grads)
    for i, g in zip(present, reduced):
        result[i] = g
    return result
