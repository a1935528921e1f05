"""Which samples each worker trains on under elastic training, framework-free.

Unlike Horovod's ``ElasticSampler`` (torch only; it allgathers every worker's processed indices), the
processed samples follow from the layout and the number of synchronous steps, so the state is just the
epoch and a processed-sample mask, identical on every worker. Unprocessed samples are dealt round-robin
in the epoch's seeded order, wrapped to equal shares (as ``DistributedSampler`` does), and dealt again
over the new workers after a resize.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hvdkit.core.validation import check_int


class ElasticIndexSampler:
    """The samples of an epoch dealt out over the current workers, with a processed-sample mask identical on every
    worker."""
    def __init__(self, num_samples: int, *, shuffle: bool = True, seed: int = 0) -> None:
        self.num_samples = check_int("num_samples", num_samples, minimum=1)
        self.shuffle = bool(shuffle)
        self.seed = check_int("seed", seed, minimum=0)
        self.epoch = 0
        self._processed = np.zeros(num_samples, dtype=bool)
        self._padded: np.ndarray | None = None
        self._size = 1

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` with no sample processed."""
        self.epoch = check_int("epoch", epoch, minimum=0)
        self._processed[:] = False
        self._padded = None

    def order(self) -> np.ndarray:
        """This epoch's sample order (the same on every worker)."""
        if not self.shuffle:
            return np.arange(self.num_samples)
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.num_samples)

    @property
    def remaining(self) -> int:
        """Samples of the epoch not trained yet."""
        return int(self.num_samples - self._processed.sum())

    def layout(self, rank: int, size: int) -> np.ndarray:
        """Deal the epoch's unprocessed samples over ``size`` workers; return ``rank``'s share.

        Every worker gets ``ceil(remaining / size)`` indices (an empty array when nothing remains).
        """
        check_int("size", size, minimum=1)
        if not 0 <= rank < size:
            raise ValueError(f"rank must be in [0, size={size}), got {rank!r}")
        order = self.order()
        rest = order[~self._processed[order]]
        per = math.ceil(len(rest) / size)
        padded = np.resize(rest, per * size) if len(rest) else rest  # np.resize wraps around
        self._padded, self._size = padded, size
        return padded[rank::size]

    def record(self, batches: int, batch_size: int) -> None:
        """Every worker has trained ``batches`` batches of ``batch_size`` of the current layout."""
        if self._padded is None:
            raise RuntimeError("record() before layout(): deal the samples out first")
        per = len(self._padded) // self._size
        done = min(check_int("batches", batches, minimum=0) * check_int("batch_size", batch_size, minimum=1), per)
        # Worker r trained padded[r::size][:done]; over all workers that is padded[:done * size].
        self._processed[self._padded[: done * self._size]] = True

    def state_dict(self) -> dict[str, Any]:
        """The epoch and the processed-sample mask (packed bits)."""
        return {"epoch": self.epoch, "num_samples": self.num_samples,
                "processed": np.packbits(self._processed).tobytes()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the dataset must have the same length."""
        if state["num_samples"] != self.num_samples:
            raise ValueError(f"sampler state is for {state['num_samples']} samples, this sampler has "
                             f"{self.num_samples}: was the dataset changed?")
        self.epoch = int(state["epoch"])
        bits = np.frombuffer(state["processed"], dtype=np.uint8)
        self._processed = np.unpackbits(bits, count=self.num_samples).astype(bool)
        self._padded = None
