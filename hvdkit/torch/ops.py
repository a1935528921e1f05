"""The core's FrameworkOps for PyTorch: LR/momentum access and checkpoint snapshots."""

from __future__ import annotations

import io
import random
from typing import Any

import horovod.torch as hvd
import numpy as np
import torch

from hvdkit.core.types import Snapshot


class TorchOps:
    """Reads and sets optimizer LR/momentum and captures/restores model, optimizer and RNG state."""

    name = "torch"
    lr_in_momentum = False  # torch SGD: v = m*v + g; p -= lr*v (the LR stays outside the buffer)

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model = model
        self.optimizer = optimizer

    def get_lr(self) -> float:
        """The first parameter group's LR (hvdkit sets every group alike)."""
        return float(self.optimizer.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        """Set every parameter group's LR."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def scale_momentum(self, factor: float) -> None:
        """Not needed for torch optimizers (the LR is outside the buffer); kept for the interface."""

    def capture(self) -> Snapshot:
        """Model, optimizer and RNG state."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        }

    def restore(self, snapshot: Snapshot) -> None:
        """Put a :meth:`capture` snapshot back."""
        self.model.load_state_dict(snapshot["model"])
        self.optimizer.load_state_dict(snapshot["optimizer"])
        rng = snapshot.get("rng")
        if rng:
            torch.set_rng_state(rng["torch"])
            np.random.set_state(rng["numpy"])
            random.setstate(rng["python"])

    def broadcast_state(self, root_rank: int) -> None:
        """Every rank gets ``root_rank``'s parameters, buffers and optimizer state."""
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=root_rank)
        hvd.broadcast_optimizer_state(self.optimizer, root_rank=root_rank)

    def dump(self, obj: Any, f: Any) -> None:
        """``torch.save`` into ``f``."""
        torch.save(obj, f)

    def loads(self, data: bytes) -> Any:
        # Our own checkpoint, its checksum verified before this is called; it holds RNG tuples.
        """Read what :meth:`dump` wrote."""
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
