"""Which rows of a dataset each worker takes: the same rule for every adapter's ``shard``.

Every rank gets the same number of rows, or a rank with one batch more would wait forever in an
allreduce: ``ceil(n / size)``, padded by wrapping to the first rows (as ``DistributedSampler`` does), or
``floor(n / size)`` with ``drop_last=True``. Rank ``r`` takes rows ``r, r + size, r + 2*size, ...``.
"""

from __future__ import annotations

import math
from typing import Any

from hvdkit.core.validation import check_int


def check_rank(rank: Any, size: Any) -> tuple[int, int]:
    """Validate a (rank, size) pair; the errors name the argument, the value and what is allowed."""
    check_int("size", size, minimum=1)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < size:
        raise ValueError(f"rank must be an integer in [0, size={size}), got {rank!r}")
    return rank, size


def shard_indices(num_samples: int, rank: int, size: int, *, drop_last: bool = False) -> list[int]:
    """Row indices for ``rank`` of ``size`` workers over ``num_samples`` rows (see the module docstring)."""
    check_rank(rank, size)
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"data must hold at least one sample, got {num_samples!r} samples")
    if drop_last:
        per = num_samples // size
        if per == 0:
            raise ValueError(f"drop_last=True leaves no sample for each of {size} workers: the data has "
                             f"{num_samples}; use drop_last=False (pads by repeating rows) or more data")
        return list(range(rank, per * size, size))
    per = math.ceil(num_samples / size)
    return [(rank + k * size) % num_samples for k in range(per)]
