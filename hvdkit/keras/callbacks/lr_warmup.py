"""Keras wrapper of the shared :class:`hvdkit.callbacks.LearningRateWarmup`."""

from __future__ import annotations

from hvdkit.callbacks.lr_warmup import LearningRateWarmup as _Core
from hvdkit.keras.callbacks.bridge import EngineBridge


class LearningRateWarmup(EngineBridge):
    """Linear-scaling-rule warm-up inside ``model.fit``: the target LR is the optimizer's,
    steps per epoch come from ``fit``; updated every batch. See the core class for the formula.
    Momentum correction is applied for Keras SGD with momentum (its velocity holds the LR)."""

    def __init__(self, warmup_epochs: float = 5, steps_per_epoch: int | None = None,
                 momentum_correction: bool = True, verbose: bool = False) -> None:
        super().__init__(_Core(warmup_epochs, steps_per_epoch, momentum_correction, verbose))
