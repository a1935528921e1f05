"""Keras 3 variables <-> the tf.Variables behind them (Horovod's TF ops need ``tf.Variable``s), and
broadcasting either."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf


def to_tf_variable(v: Any) -> tf.Variable:
    """The tf.Variable behind a Keras 3 variable (or the tf.Variable itself)."""
    if isinstance(v, tf.Variable):
        return v
    inner = getattr(v, "value", None)  # keras.Variable on the TF backend
    if isinstance(inner, tf.Variable):
        return inner
    raise TypeError(f"expected a tf.Variable or a Keras 3 variable on the TensorFlow backend, got {type(v).__name__}")


def to_tf_variables(variables: Iterable[Any]) -> list[tf.Variable]:
    """:func:`to_tf_variable` of each."""
    return [to_tf_variable(v) for v in variables]


def broadcast_variables(variables: Iterable[Any], root_rank: int = 0, process_set: Any = hvd.global_process_set,
                        inplace: bool = False) -> Any:
    """Horovod's ``broadcast_variables`` (``root_rank`` defaults to 0) for Keras 3 variables or
    tf.Variables; a no-op in a one-process world."""
    tf_vars = to_tf_variables(variables)
    if not tf_vars or hvd.size() == 1:
        return None
    if inplace:
        return hvd.broadcast_variables(tf_vars, root_rank=root_rank, process_set=process_set, inplace=True)
    # Named by position: Horovod pairs tensors by name, and ranks may name a variable differently (a model
    # loaded on rank 0 only keeps its saved layer names), which would hang.
    for i, var in enumerate(tf_vars):
        var.assign(hvd.broadcast(var, root_rank=root_rank, name=f"hvdkit.broadcast_variables.{i}",
                                 process_set=process_set))
    return None
