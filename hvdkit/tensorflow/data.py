"""This rank's shard of TensorFlow and Keras inputs: NumPy arrays (or tuples/lists/dicts of them) or a
tf.data.Dataset (``hvdkit.keras.shard`` is this function).

``shard`` is the same concept as ``hvdkit.torch.shard`` (one rule, :mod:`hvdkit.core.sharding`): every
rank gets the same number of rows, so every rank runs the same number of steps.
"""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvdkit.core.deprecation import reject_unknown, renamed_kwarg
from hvdkit.core.rows import leaves, map_leaves, num_rows
from hvdkit.core.sharding import check_rank, shard_indices
from hvdkit.core.validation import check_bool


def _is_array(x: object) -> bool:
    return hasattr(x, "shape") and hasattr(x, "__getitem__") and hasattr(x, "__len__")


def shard(data: Any, *, rank: int | None = None, size: int | None = None, drop_last: bool = False,
          **deprecated: Any) -> Any:
    """This rank's shard: rows ``rank, rank + size, ...`` of arrays (or of each one in a tuple/list/dict
    of them, cut alike), ``ceil(n / size)`` rows per rank (the last ranks' padded with the first rows) or
    ``floor(n / size)`` with ``drop_last=True``.

    A ``tf.data.Dataset`` of known length is padded the same way (repeated, then cut), then sharded
    with ``Dataset.shard``: shard before shuffling and batching. One of unknown or infinite length is
    only sharded; give ``fit`` a ``steps_per_epoch``. ``rank``/``size`` default to this worker's.
    """
    drop_last = renamed_kwarg("shard", deprecated, "drop_remainder", "drop_last", drop_last, False)
    reject_unknown("shard", deprecated)
    check_bool("drop_last", drop_last)
    n = hvd.size() if size is None else size
    r = hvd.rank() if rank is None else rank
    check_rank(r, n)
    if isinstance(data, tf.data.Dataset):
        rows = int(data.cardinality())
        if rows >= 0:  # known and finite
            shard_indices(rows, r, n, drop_last=drop_last)  # validates (rows >= 1, enough rows)
            per = rows // n if drop_last else -(-rows // n)
            data = data.repeat().take(per * n) if per * n > rows else data.take(per * n)
        return data.shard(n, r)
    parts = leaves(data)
    if not parts or not all(_is_array(p) for p in parts):
        raise TypeError("data must be a NumPy array, a tuple/list/dict of arrays or a tf.data.Dataset, got "
                        f"{type(data).__name__} ({data!r:.60})")
    idx = np.asarray(shard_indices(num_rows(data), r, n, drop_last=drop_last))
    return map_leaves(data, lambda a: a[idx])
