"""Data for PyTorch workers: this rank's shard, and its sampler (reshuffled per epoch, or exact for evaluation).

``shard`` is the same concept as ``hvdkit.keras.shard`` (one rule, :mod:`hvdkit.core.sharding`):
every rank gets the same number of rows, so every rank runs the same number of steps.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sized
from typing import Any

import horovod.torch as hvd
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, Subset
from torch.utils.data.distributed import DistributedSampler

from hvdkit.core.deprecation import reject_unknown, renamed_kwarg, warn_renamed
from hvdkit.core.rows import leaves, map_leaves, num_rows
from hvdkit.core.sharding import check_rank, shard_indices
from hvdkit.core.validation import check_bool, check_int


def _rank_size(rank: int | None, size: int | None) -> tuple[int, int]:
    size = hvd.size() if size is None else size
    rank = hvd.rank() if rank is None else rank
    return check_rank(rank, size)


def shard(data: Any, *, rank: int | None = None, size: int | None = None, drop_last: bool = False,
          **deprecated: Any) -> Any:
    """This rank's shard of ``data``: a ``Subset`` of a map-style ``Dataset``, or the rows of a tensor or
    NumPy array (or of each one in a tuple/list/dict of them, cut alike).

    Every rank gets ``ceil(n / size)`` rows (the last ranks' padded with the first rows), or
    ``floor(n / size)`` with ``drop_last=True``, so every rank runs the same number of steps
    (:mod:`hvdkit.core.sharding`). ``rank``/``size`` default to this worker's.
    """
    drop_last = renamed_kwarg("shard", deprecated, "drop_remainder", "drop_last", drop_last, False)
    reject_unknown("shard", deprecated)
    check_bool("drop_last", drop_last)
    r, n = _rank_size(rank, size)
    if isinstance(data, (torch.Tensor, np.ndarray)) or (isinstance(data, (tuple, list, Mapping)) and data):
        bad = [type(p).__name__ for p in leaves(data) if not isinstance(p, (torch.Tensor, np.ndarray))]
        if bad:
            raise TypeError(f"data must hold tensors or NumPy arrays, got {bad[0]}")
        idx = shard_indices(num_rows(data), r, n, drop_last=drop_last)
        at, at_np = torch.as_tensor(idx), np.asarray(idx)
        return map_leaves(data, lambda a: a[at] if isinstance(a, torch.Tensor) else a[at_np])
    if isinstance(data, Dataset) and isinstance(data, Sized):
        return Subset(data, shard_indices(len(data), r, n, drop_last=drop_last))
    raise TypeError("data must be a map-style torch Dataset with a length, a tensor or NumPy array, or a "
                    f"tuple/list/dict of them, got {type(data).__name__} ({data!r:.60})")


def shard_sampler(dataset: Dataset, *, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                  for_eval: bool = False) -> Sampler[int]:
    """This rank's sampler over ``dataset``, for a ``DataLoader(dataset, sampler=...)`` in a hand-written loop.

    Training (default): a ``DistributedSampler`` over Horovod's world, reshuffled each epoch from one
    ``seed`` (call ``set_epoch(e)``; the ``Trainer`` does). Every rank gets the same number of indices, as
    with ``shard`` (padded, or cut with ``drop_last=True``).

    ``for_eval=True``: disjoint, unpadded shards in order (rank ``r`` takes ``r, r + size, ...``), so sums
    reduced over ranks count every sample once and give exact global metrics; ranks may then run one
    batch more or fewer, which evaluation allows (no collective per batch). ``shuffle`` and ``drop_last``
    do not apply to it.
    """
    seed = check_int("seed", seed)
    check_bool("shuffle", shuffle)
    check_bool("drop_last", drop_last)
    if check_bool("for_eval", for_eval):
        if shuffle is not True or drop_last:
            raise ValueError("for_eval=True gives every sample once, in order: leave shuffle and drop_last at "
                             f"their defaults, got shuffle={shuffle!r}, drop_last={drop_last!r}")
        if not isinstance(dataset, Sized):
            raise TypeError(f"dataset must have a length for for_eval=True, got {type(dataset).__name__}")
        return _EvalShards(dataset)
    return DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=shuffle, seed=seed,
                              drop_last=drop_last)


def training_loader(data: Any, batch_size: int | None, *, shuffle: bool, seed: int, drop_last: bool) -> DataLoader:
    """``data`` as the Trainer's DataLoader: a DataLoader as given (the caller sharded it), or a Dataset
    sharded over ranks with :func:`shard_sampler` in batches of ``batch_size`` per rank."""
    if isinstance(data, DataLoader):
        if len(data) == 0:
            raise ValueError("train_data must give at least one batch, got a DataLoader with none")
        return data
    if not isinstance(data, Dataset) or not isinstance(data, Sized):
        raise TypeError(f"train_data must be a torch Dataset with a length or a DataLoader, got {type(data).__name__}")
    if len(data) == 0:
        raise ValueError("train_data must hold at least one sample, got an empty Dataset")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    return DataLoader(data, batch_size=batch_size, sampler=shard_sampler(data, shuffle=shuffle, seed=seed,
                                                                         drop_last=drop_last))


class _EvalShards(Sampler[int]):
    """Disjoint, unpadded shards for evaluation: rank r takes indices r, r+size, ..."""

    def __init__(self, dataset: Sized, rank: int | None = None, size: int | None = None) -> None:
        self.n = len(dataset)
        self.rank, self.size = _rank_size(rank, size)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.size))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.size))


class EvalShardSampler(_EvalShards):
    """Deprecated: ``shard_sampler(dataset, for_eval=True)``."""

    def __init__(self, dataset: Sized, rank: int | None = None, size: int | None = None) -> None:
        warn_renamed("EvalShardSampler(dataset)", "shard_sampler(dataset, for_eval=True)")
        super().__init__(dataset, rank, size)
