"""Sharding for Keras inputs: NumPy arrays or a tf.data.Dataset."""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as hvd
import tensorflow as tf


def shard(data: Any, rank: int | None = None, size: int | None = None) -> Any:
    """This rank's disjoint shard: ``data[rank::size]`` for arrays (or a tuple/list/dict of them),
    ``dataset.shard(size, rank)`` for a ``tf.data.Dataset`` (shard before shuffling and batching).

    With ``fit(shuffle=False)``, 2 workers with batch ``b`` then see exactly the
    samples 1 worker with batch ``2b`` sees, batch for batch.
    """
    r = hvd.rank() if rank is None else rank
    n = hvd.size() if size is None else size
    if isinstance(data, tf.data.Dataset):
        return data.shard(n, r)
    if isinstance(data, dict):
        return {k: shard(v, r, n) for k, v in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(shard(v, r, n) for v in data)
    if hasattr(data, "__getitem__") and hasattr(data, "shape"):
        return data[r::n]
    raise TypeError(f"data must be a NumPy array, a tuple/list/dict of arrays or a tf.data.Dataset, "
                    f"got {type(data).__name__}")
