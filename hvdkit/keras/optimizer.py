"""A Keras 3 optimizer that averages gradients across Horovod workers before applying them."""

from __future__ import annotations

from typing import Any

import keras

from hvdkit.core.collectives import check_reduction
from hvdkit.core.validation import check_int
from hvdkit.keras.mixed_precision import agreed_loss_scaling
from hvdkit.tensorflow.gradients import allreduce_gradients

_CLASSES: dict[type, type] = {}


class _DistributedMixin:
    """Allreduce in ``_clip_gradients``: Keras calls it once per update with the final gradients
    (after its own gradient accumulation), before clipping and weight decay. So
    ``backward_passes_per_step=N`` (Keras's ``gradient_accumulation_steps``) communicates
    once every N steps, and clipping sees the averaged gradients."""

    _hvdkit_distributed = True
    _hvdkit_op = "average"
    _hvdkit_compression = "none"

    def _clip_gradients(self, grads: list[Any]) -> list[Any]:
        grads = allreduce_gradients(grads, op=self._hvdkit_op, compression=self._hvdkit_compression,
                                    name_prefix=f"hvdkit.{self.name}")  # type: ignore[attr-defined]
        return super()._clip_gradients(grads)  # type: ignore[misc]


def _distributed_class(cls: type) -> type:
    if cls not in _CLASSES:
        # Same name and module as the base class: a saved model records the plain
        # optimizer (as horovod.keras did), and loads without hvdkit.
        _CLASSES[cls] = type(cls.__name__, (_DistributedMixin, cls), {"__module__": cls.__module__,
                                                                      "__qualname__": cls.__qualname__})
    return _CLASSES[cls]


def is_distributed(optimizer: Any) -> bool:
    """True for an optimizer that averages gradients over workers (one ``DistributedOptimizer`` returned)."""
    return bool(getattr(optimizer, "_hvdkit_distributed", False))


def DistributedOptimizer(optimizer: keras.optimizers.Optimizer, *, compression: str = "none",
                         backward_passes_per_step: int = 1, op: str = "average") -> keras.optimizers.Optimizer:
    """Return a copy of ``optimizer`` (same class, same config) whose updates use gradients
    averaged over all workers. Build the model with it before the first step.

    It behaves like the optimizer it wraps: ``learning_rate`` reads and sets the LR,
    Keras's ``LearningRateScheduler``/``ReduceLROnPlateau`` work, ``get_config()``
    round-trips, and a saved model reloads with the plain optimizer class.

    Mixed precision: a ``keras.optimizers.LossScaleOptimizer`` (or any optimizer while the global policy
    is ``mixed_float16``) comes back as :class:`hvdkit.keras.mixed_precision.LossScaleOptimizer` around
    the distributed inner optimizer, so every rank skips the same overflowing steps.
    """
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"optimizer must be a keras.optimizers.Optimizer (Keras 3), got {type(optimizer).__name__}"
                        + (" (a legacy tf.keras optimizer?)" if "legacy" in type(optimizer).__module__ else ""))
    if is_distributed(optimizer):
        raise ValueError("optimizer must not already be wrapped by DistributedOptimizer")
    if optimizer.built:
        raise ValueError("optimizer must be wrapped before it is built (before the first training step); "
                         "got one that already holds variables")
    check_reduction(compression, op)
    check_int("backward_passes_per_step", backward_passes_per_step, minimum=1)
    scaled = agreed_loss_scaling(optimizer, lambda inner: _wrap(inner, compression, backward_passes_per_step, op))
    return _wrap(optimizer, compression, backward_passes_per_step, op) if scaled is None else scaled


def _wrap(optimizer: keras.optimizers.Optimizer, compression: str, backward_passes_per_step: int,
          op: str) -> keras.optimizers.Optimizer:
    """The distributed copy of a plain (checked) optimizer."""
    config = optimizer.get_config()
    if backward_passes_per_step > 1:
        if config.get("gradient_accumulation_steps"):
            raise ValueError("backward_passes_per_step must be 1 when the optimizer already sets "
                             f"gradient_accumulation_steps, got {backward_passes_per_step}")
        config["gradient_accumulation_steps"] = backward_passes_per_step
    dist_cls: Any = _distributed_class(type(optimizer))
    dist = dist_cls.from_config(config)
    dist._hvdkit_op = op
    dist._hvdkit_compression = compression
    return dist
