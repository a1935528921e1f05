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

    def add(self, values: Sequence[torch.Tensor | float], count: int) -> None:
        """Keep one batch's values and its number of samples. A value may be a Python number (a metric that
        calls ``.item()``); one that is neither that nor a one-element tensor is refused at once, naming it."""
        for name, column, value in zip(self.names, self._values, values):
            if not isinstance(value, torch.Tensor) or value.dim():  # the common 0-d tensor costs nothing more
                value = self._scalar(name, value)
            column.append(value)
        self._counts.append(count)

    def _scalar(self, name: str, value: object) -> torch.Tensor:
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return value.reshape(())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return torch.tensor(float(value), device=self.device)
        shape = f"a tensor of shape {list(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)
        raise ValueError(f"{name!r} must give the batch's mean as a number or a one-element tensor, got {shape}")

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
