"""Data sharding: each rank sees a disjoint shard each epoch, reshuffled per epoch from one seed."""

from __future__ import annotations

from collections.abc import Iterator, Sized

import horovod.torch as hvd
from torch.utils.data import Dataset, Sampler
from torch.utils.data.distributed import DistributedSampler

from hvdkit.core.validation import check_int


def shard(dataset: Dataset, *, shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> DistributedSampler:
    """A ``DistributedSampler`` over Horovod's world: call ``set_epoch(e)`` each epoch to reshuffle.

    Every rank gets ``ceil(len/size)`` indices (padded by repeating a few when the
    length does not divide, unless ``drop_last``); the shards of one epoch are disjoint.
    """
    check_int("seed", seed)
    return DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=shuffle, seed=seed,
                              drop_last=drop_last)


class EvalShardSampler(Sampler[int]):
    """Disjoint, unpadded shards for evaluation: rank r takes indices r, r+size, ...

    No sample is counted twice, so sums reduced over ranks give exact global metrics.
    """

    def __init__(self, dataset: Sized, rank: int | None = None, size: int | None = None) -> None:
        self.n = len(dataset)
        self.rank = hvd.rank() if rank is None else rank
        self.size = hvd.size() if size is None else size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.size))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.size))
