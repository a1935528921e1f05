"""What ``hvdkit.keras`` does through TensorFlow (``KERAS_BACKEND=tensorflow``): Horovod's TF binding for the
gradient list, the non-finite flags and the variable broadcast; TF's runtime and ``shard``.
:mod:`hvdkit.keras.backend` picks this module or :mod:`hvdkit.keras.backend_torch`; both have the same names."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import horovod.tensorflow as hvd
import keras
import tensorflow as tf

from hvdkit.core.numerics import APPLIED, NOT_FINITE_ANY_MORE, QUOTED, SKIPPED, STOPPED
from hvdkit.tensorflow.data import shard
from hvdkit.tensorflow.elastic_run import run as elastic_run
from hvdkit.tensorflow.gradients import allreduce_gradients
from hvdkit.tensorflow.runtime import HorovodComm, init, local_rank, local_size, rank, size
from hvdkit.tensorflow.variables import broadcast_variables as _broadcast_variables

NAME = "tensorflow"

__all__ = ["NAME", "HorovodComm", "agree_finite", "allreduce_gradients", "broadcast_variables", "elastic_run",
           "flags_verdict", "guarded_update", "hvd", "init", "local_rank", "local_size", "nonfinite_flags", "rank",
           "shard", "size", "sum_over_ranks"]


def _all_finite(grads: list[Any]) -> Any:
    """A boolean tensor: every value of every (dense or sparse) gradient is finite."""
    checks = [tf.reduce_all(tf.math.is_finite(g.values if isinstance(g, tf.IndexedSlices) else g))
              for g in grads if g is not None]
    return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


def nonfinite_flags(grads: list[Any], process_set: Any, name: str) -> Any:
    """Which ranks' own ``grads`` are not finite: a flag per rank, summed over ``process_set`` (every step,
    outside any branch, so every rank runs the same collectives)."""
    local_bad = tf.cast(tf.logical_not(_all_finite(grads)), tf.float32)
    # Traced, rank and size are read when the step runs: Keras keeps its train function across an elastic
    # reset, and ranks that join trace it at the new size (flags of another length: Horovod refuses them).
    rank, size = (hvd.rank(), hvd.size()) if tf.executing_eagerly() else (hvd.rank_op(), hvd.size_op())
    return hvd.allreduce(tf.one_hot(rank, size) * local_bad, op=hvd.Sum, name=name, process_set=process_set)


def flags_verdict(flags: Any, reduced: list[Any]) -> tuple[Any, Any]:
    """``(ranks whose own gradients were not finite, whether the update may run)`` from the summed flags and
    the averaged gradients: the same on every rank."""
    return tf.reshape(tf.where(flags > 0), [-1]), tf.logical_and(tf.reduce_all(flags == 0), _all_finite(reduced))


def guarded_update(finite: Any, update: Callable[[], None], policy: str, step: Any, bad_ranks: Any) -> None:
    """Run ``update`` when ``finite``; otherwise the ``nonfinite`` policy: ``stop`` fails the step on every rank
    before the update, ``skip`` skips it, ``warn`` applies it; both with a warning (inside the traced step)."""
    def nonfinite() -> None:
        message = tf.strings.format(
            "non-finite gradients (NaN or inf) after the allreduce at step {}; the local gradients of this step "
            "were non-finite on rank(s) {} (none: they overflowed in the allreduce)", (step, bad_ranks))
        if policy == "stop":
            # no quotes: TensorFlow escapes them in the error it raises
            tf.debugging.Assert(False, [tf.strings.join([
                "hvdkit NonFiniteError: ", message, ". " + STOPPED.format(stop="stop", skip="skip", warn="warn")])])
            return
        outcome = SKIPPED if policy == "skip" else APPLIED + NOT_FINITE_ANY_MORE
        tf.print("hvdkit WARNING:", message, ": " + outcome.format(**QUOTED), output_stream=sys.stderr)
        if policy == "warn":
            update()

    keras.ops.cond(finite, update, nonfinite)


def agree_finite(finite: Any, name: str) -> Any:
    """``finite`` (a boolean tensor) and-ed over every rank: one allreduce (max) of an overflow flag."""
    overflow = tf.cast(tf.logical_not(finite), tf.float32)
    return tf.equal(hvd.allreduce(overflow, op=hvd.Max, name=name), 0.0)


def broadcast_variables(variables: list[Any], root_rank: int, process_set: Any = None) -> None:
    """``root_rank``'s values of these Keras variables on every rank (of ``process_set``)."""
    _broadcast_variables(variables, root_rank=root_rank,
                         process_set=hvd.global_process_set if process_set is None else process_set)


def sum_over_ranks(tensor: Any, name: str) -> Any:
    """``tensor`` summed over every rank, differentiable: the gradient of Horovod's TF allreduce is the
    sum of the ranks' incoming gradients."""
    return hvd.allreduce(tensor, op=hvd.Sum, name=name)


def capture_rng() -> dict[str, Any]:
    """Nothing beyond Python's and NumPy's generators, which the caller captures: with them a resumed
    ``fit(shuffle=True)`` on TensorFlow trains on the uninterrupted run's order (a slow check in
    tests/keras/test_keras_training.py resumes one)."""
    return {}


def restore_rng(state: dict[str, Any]) -> None:
    """Nothing to put back (:func:`capture_rng`)."""
