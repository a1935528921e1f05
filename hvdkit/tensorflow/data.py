"""This rank's shard of TensorFlow and Keras inputs: NumPy arrays (or tuples/lists/dicts of them) or a
tf.data.Dataset (``hvdkit.keras.shard`` is this function).

``shard`` is the same concept as ``hvdkit.torch.shard`` (one rule, :mod:`hvdkit.core.sharding`): every
rank gets the same number of rows, so every rank runs the same number of steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvdkit.core.deprecation import reject_unknown, renamed_kwarg
from hvdkit.core.sharding import check_rank, shard_indices
from hvdkit.core.validation import check_bool


def _is_array(x: object) -> bool:
    return hasattr(x, "shape") and hasattr(x, "__getitem__") and hasattr(x, "__len__")


def _rows(data: Any) -> int:
    if isinstance(data, Mapping):
        return _rows(next(iter(data.values())))
    if isinstance(data, (tuple, list)):
        return _rows(data[0])
    return len(data)


def _valid(data: object) -> bool:
    if isinstance(data, Mapping):
        return bool(data) and all(_valid(v) for v in data.values())
    if isinstance(data, (tuple, list)):
        return bool(data) and all(_valid(v) for v in data)
    return _is_array(data)


def _take(data: Any, idx: np.ndarray, rows: int) -> Any:
    if isinstance(data, Mapping):
        return {k: _take(v, idx, rows) for k, v in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(_take(v, idx, rows) for v in data)
    if len(data) != rows:
        raise ValueError(f"data's parts must hold the same number of rows, got {len(data)} and {rows}")
    return data[idx]


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
    if not _valid(data):
        raise TypeError("data must be a NumPy array, a tuple/list/dict of arrays or a tf.data.Dataset, got "
                        f"{type(data).__name__} ({data!r:.60})")
    rows = _rows(data)
    return _take(data, np.asarray(shard_indices(rows, r, n, drop_last=drop_last)), rows)
