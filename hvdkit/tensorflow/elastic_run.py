"""TensorFlow's elastic retry loop: Horovod's ``run`` with :func:`is_worker_failure` as its test (Horovod's
names for it are in :mod:`hvdkit.compat.horovod.tensorflow_elastic`). Horovod's counts an op error as a worker
failure only when its message names a Horovod op type, which misses ops hvdkit names (``hvdkit.sgd.0`` inside a
``tf.function``) and Gloo's transport errors, and it returns ``None`` for any other ``UnknownError``; here those
are failures and anything else is raised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from horovod.tensorflow.elastic import HorovodInternalError, run_fn

# "[[{{node sgd/hvdkit.sgd.0}}]]" or "Detected at node sgd/hvdkit.sgd.0": the node an error inside a
# tf.function came from.
_NODE = re.compile(r"\{\{node ([^}\s]+)\}\}|Detected at node ([^\s]+)")
# Gloo's error messages start with the source file that raised them: "[.../gloo/transport/tcp/pair.cc:589]".
_GLOO_SOURCE = re.compile(r"gloo/[\w/]+\.(?:cc|h):\d+\]")


def is_worker_failure(error: BaseException) -> bool:
    """Whether a TensorFlow op error came from a Horovod collective, the way a lost worker shows up:
    Horovod's own status text, a node that is a Horovod op (Horovod's default names, or hvdkit's
    ``hvdkit.*`` names), or an error raised by Gloo's transport."""
    if not isinstance(error, tf.errors.OpError):
        return False
    message = error.message or ""
    if "Horovod" in message or _GLOO_SOURCE.search(message):
        return True
    for node in _NODE.findall(message):
        leaf = (node[0] or node[1]).rsplit("/", 1)[-1]
        if leaf.startswith(("Horovod", "hvdkit.")):
            return True
    return False


def run(func: Callable[..., Any]) -> Callable[..., Any]:
    """Horovod's elastic retry loop (``hvd.elastic.run``): a worker failure inside ``func`` (see
    :func:`is_worker_failure`) becomes a ``HorovodInternalError``, so that the state is restored and
    the workers reset; any other error is raised as it is."""
    from horovod.tensorflow.elastic import _reset

    def wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(state, *args, **kwargs)
        except tf.errors.OpError as e:
            if is_worker_failure(e):
                raise HorovodInternalError(e) from e
            raise

    return run_fn(wrapper, _reset)


__all__ = ["is_worker_failure", "run"]
