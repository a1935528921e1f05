"""The Keras ``LearningRateWarmup``: gradual warm-up under the linear scaling rule."""

from __future__ import annotations

from hvdkit import callbacks as core
from hvdkit.keras.engine_bridge import EngineBridge


class LearningRateWarmup(EngineBridge):
    """Keras ``model.fit`` callback running :class:`hvdkit.callbacks.LearningRateWarmup` (same arguments):
    the LR ramps from ``T/n`` to the optimizer's ``T`` over ``warmup_epochs`` epochs, every batch."""

    core_class = core.LearningRateWarmup
    core: core.LearningRateWarmup

    def __init__(self, warmup_epochs: float = 5, steps_per_epoch: int | None = None,
                 momentum_correction: bool = True, verbose: bool = False) -> None:
        super().__init__(core.LearningRateWarmup(warmup_epochs, steps_per_epoch, momentum_correction, verbose))
