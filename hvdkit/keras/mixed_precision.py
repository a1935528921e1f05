"""Keras 3 mixed precision under Horovod: a loss-scale optimizer whose skipped steps every rank agrees on
(Keras's decides per rank, so a rank that overflowed would skip the allreduce the others wait in).
:func:`hvdkit.keras.DistributedOptimizer` returns one for a ``LossScaleOptimizer``, and for any optimizer
while the global policy is ``mixed_float16`` (``"mixed_bfloat16"`` needs nothing)::

    keras.mixed_precision.set_global_policy("mixed_float16")
    model = build_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss=...)
"""

from __future__ import annotations

from typing import Any

import keras

from hvdkit.core.comm import under_elastic_driver
from hvdkit.keras.backend import current as backend

_KerasLSO = keras.optimizers.LossScaleOptimizer


class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras's ``LossScaleOptimizer`` whose finite-gradients check is agreed over all Horovod ranks.
    ``inner_optimizer`` must come from :func:`hvdkit.keras.DistributedOptimizer`."""

    _hvdkit_distributed = True

    def __init__(self, inner_optimizer: keras.optimizers.Optimizer, initial_scale: float = 2.0 ** 15,
                 dynamic_growth_steps: int = 2000, name: str | None = None, **kwargs: Any) -> None:
        if not getattr(inner_optimizer, "_hvdkit_distributed", False):
            raise ValueError("inner_optimizer must average gradients over workers (wrap it with "
                             f"hvdkit.keras.DistributedOptimizer first), got {type(inner_optimizer).__name__}")
        super().__init__(inner_optimizer, initial_scale=initial_scale, dynamic_growth_steps=dynamic_growth_steps,
                         name=name, **kwargs)

    def check_finite(self, grads: list[Any]) -> Any:
        """True on every rank when every rank's ``grads`` are finite (one allreduce of a flag, max)."""
        finite = super().check_finite(grads)
        if backend.hvd.size() == 1 and not under_elastic_driver():
            return finite
        return backend.agree_finite(finite, "hvdkit.loss_scale.overflow")


# Same name and module as Keras's class: a saved model records the plain optimizer and loads without hvdkit.
LossScaleOptimizer.__module__ = _KerasLSO.__module__


def agreed_loss_scaling(optimizer: keras.optimizers.Optimizer, distribute: Any) -> keras.optimizers.Optimizer | None:
    """What ``DistributedOptimizer(optimizer)`` returns when loss scaling is involved, else None
    (``distribute`` wraps a plain optimizer). Keras's ``LossScaleOptimizer`` becomes hvdkit's with the
    same settings; any other optimizer gets one while the global policy is ``mixed_float16``."""
    if isinstance(optimizer, _KerasLSO):
        inner = optimizer.inner_optimizer
        if not getattr(inner, "_hvdkit_distributed", False):
            inner = distribute(inner)
        return LossScaleOptimizer(inner, initial_scale=optimizer.initial_scale,
                                  dynamic_growth_steps=optimizer.dynamic_growth_steps, name=optimizer.name)
    if keras.mixed_precision.global_policy().name == "mixed_float16":
        return LossScaleOptimizer(distribute(optimizer))
    return None


def check_loss_scaling(model: keras.Model) -> None:
    """Refuse a model that Keras gave its own ``LossScaleOptimizer`` around an hvdkit optimizer (a
    ``mixed_float16`` model compiled while the global policy was another): it would hang at the first
    step that overflows on only some ranks."""
    opt = getattr(model, "optimizer", None)
    if (isinstance(opt, _KerasLSO) and not isinstance(opt, LossScaleOptimizer)
            and getattr(opt.inner_optimizer, "_hvdkit_distributed", False)):
        raise ValueError(
            "model.optimizer is Keras's LossScaleOptimizer around an hvdkit DistributedOptimizer (Keras adds it "
            "for a mixed_float16 model): its ranks would disagree on skipped steps and hang. Set "
            "keras.mixed_precision.set_global_policy('mixed_float16') before building the optimizer, or pass "
            "hvdkit.keras.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(...)) to compile")
