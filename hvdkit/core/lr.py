"""Learning-rate maths as pure functions: the linear scaling rule with gradual warm-up (Goyal et al.
2017, "Accurate, Large Minibatch SGD"). With ``n`` workers the target LR ``T`` is ``n`` times the
one-worker LR; over ``W`` warm-up epochs of ``S`` steps, global step ``k`` uses
``T * (1/n + (1 - 1/n) * k / (W*S))``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def scaled_lr(base_lr: float, world_size: int) -> float:
    """The linear scaling rule: LR for ``world_size`` workers from the one-worker LR."""
    return base_lr * world_size


def rescale_for_world_size(lr: float, old_size: int, new_size: int) -> float:
    """An LR that was scaled for ``old_size`` workers, rescaled for ``new_size``."""
    return lr * new_size / old_size


def global_batch_size(parts: Mapping[str, int]) -> int:
    """Samples per optimizer step over all workers: world size x batch per rank x accumulation steps."""
    return int(parts["world_size"]) * int(parts["batch_size"]) * int(parts.get("accumulate_steps", 1))


def describe_global_batch(parts: Mapping[str, int]) -> str:
    """``"32 (2 workers x 16 x 1 accumulation step)"``."""
    steps = int(parts.get("accumulate_steps", 1))
    workers = int(parts["world_size"])
    return (f"{global_batch_size(parts)} ({workers} worker{'s' if workers != 1 else ''} x {parts['batch_size']} x "
            f"{steps} accumulation step{'s' if steps != 1 else ''})")


def linear_warmup_factor(progress: float, world_size: int) -> float:
    """The warm-up ramp, not capped: ``1/n`` at ``progress`` 0, 1 at ``progress`` 1 (``n = world_size``)."""
    inv = 1.0 / world_size
    return inv + (1.0 - inv) * progress


def warmup_factor(step: int, warmup_steps: int, world_size: int) -> float:
    """Multiplier on the target LR for global step ``step`` (0-based)."""
    if warmup_steps <= 0 or step >= warmup_steps:
        return 1.0
    return linear_warmup_factor(step / warmup_steps, world_size)


def warmup_lr(target_lr: float, step: int, warmup_steps: int, world_size: int) -> float:
    """The LR used at global step ``step`` under gradual warm-up to ``target_lr``."""
    return target_lr * warmup_factor(step, warmup_steps, world_size)


def momentum_correction_factor(old_lr: float, new_lr: float) -> float:
    """Factor on the velocity when the LR changes, for ``v = m*v - lr*g`` (Keras's SGD; Goyal et al.
    2017, section 2.1); 1 when ``old_lr`` is 0."""
    if old_lr == 0.0:
        return 1.0
    return new_lr / old_lr


def step_decay_factor(epoch: float, milestones: Sequence[int], gamma: float) -> float:
    """``gamma ** (number of milestones <= epoch)``: step decay at given epochs."""
    passed = sum(1 for m in milestones if epoch >= m)
    return gamma**passed


def cosine_factor(epoch: float, start_epoch: float, end_epoch: float, min_factor: float = 0.0) -> float:
    """Cosine decay from 1 at ``start_epoch`` to ``min_factor`` at ``end_epoch``."""
    if epoch <= start_epoch:
        return 1.0
    if epoch >= end_epoch:
        return min_factor
    progress = (epoch - start_epoch) / (end_epoch - start_epoch)
    return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def fractional_epoch(epoch: int, batch: int, steps_per_epoch: int | None) -> float:
    """Epoch position as a float: epoch 2, batch 5 of 10 -> 2.5."""
    if not steps_per_epoch:
        return float(epoch)
    return epoch + batch / steps_per_epoch
