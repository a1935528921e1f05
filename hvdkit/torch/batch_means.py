"""Loss and metric means over an epoch without a device sync or tensor maths per step."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class BatchMeans:
    """Keeps each batch's 0-d loss/metric tensors (on the model's device) and its size; the
    sample-weighted sums are computed once, when asked for (one device sync an epoch, none a step)."""

    def __init__(self, names: Sequence[str], device: torch.device) -> None:
        self.names = list(names)
        self.device = device
        self._values: list[list[torch.Tensor]] = [[] for _ in self.names]
        self._counts: list[int] = []

    def add(self, values: Sequence[torch.Tensor], count: int) -> None:
        """Keep one batch's values and its number of samples."""
        for column, value in zip(self._values, values):
            column.append(value)
        self._counts.append(count)

    @property
    def count(self) -> int:
        """Samples seen."""
        return sum(self._counts)

    def sums(self) -> list[float]:
        """Sample-weighted sums of each value (one device sync)."""
        if not self._counts:
            return [0.0] * len(self.names)
        dtype = torch.float32 if self.device.type == "mps" else torch.float64
        stacked = torch.stack([torch.stack(column).to(dtype) for column in self._values])  # (metrics, batches)
        weights = torch.tensor(self._counts, dtype=dtype, device=stacked.device)
        return (stacked @ weights).tolist()

    def means(self) -> dict[str, float]:
        """Sample-weighted means of each value, by name."""
        total = max(self.count, 1)
        return {name: s / total for name, s in zip(self.names, self.sums())}
