"""A Keras 3 optimizer that averages gradients across Horovod workers before applying them."""

from __future__ import annotations

import numbers
from types import SimpleNamespace
from typing import Any

import keras

from hvdkit.core.collectives import resolve_reduction
from hvdkit.core.numerics import check_nonfinite
from hvdkit.core.validation import check_int, check_number
from hvdkit.keras.backend import current as backend
from hvdkit.keras.mixed_precision import agreed_loss_scaling
from hvdkit.keras.twin_class import twin_class

_CLASSES: dict[type, type] = {}


class _DistributedMixin:
    """Allreduce in ``_clip_gradients``: Keras calls it once per update with the final gradients
    (after its own gradient accumulation), before clipping and weight decay. So
    ``backward_passes_per_step=N`` (Keras's ``gradient_accumulation_steps``) communicates
    once every N steps, and clipping sees the averaged gradients."""

    _hvdkit_distributed = True
    _hvdkit_reduce: dict[str, Any] = {}
    _hvdkit_scale = 1.0  # backward_passes_per_step when the aggregated gradients are summed (Horovod's default)
    _hvdkit_nonfinite = "stop"
    # Declared for type checkers only: the Keras optimizer this mixes into has them (no values here, so
    # nothing shadows Keras's own attributes and properties).
    name: str
    iterations: Any
    _iterations: Any
    gradient_accumulation_steps: int | None
    _hvdkit_bad_ranks: Any
    _hvdkit_finite: Any

    def _clip_gradients(self, grads: list[Any]) -> list[Any]:
        # Which ranks' own gradients are not finite: a flag per rank, summed beside the gradients. The
        # decision below reads only allreduced values, the same on every rank.
        hvd = backend.hvd
        process_set = self._hvdkit_reduce.get("process_set") or hvd.global_process_set
        flags = backend.nonfinite_flags(grads, process_set, f"hvdkit.{self.name}.nonfinite")
        grads = backend.allreduce_gradients(grads, name_prefix=f"hvdkit.{self.name}", **self._hvdkit_reduce)
        if self._hvdkit_scale != 1.0:  # Keras averages what it accumulated; Horovod sums unless told to average
            grads = [None if g is None else g * self._hvdkit_scale for g in grads]
        self._hvdkit_bad_ranks, self._hvdkit_finite = backend.flags_verdict(flags, grads)
        return super()._clip_gradients(grads)  # type: ignore[misc]

    def _backend_update_step(self, grads: list[Any], trainable_variables: list[Any], learning_rate: Any) -> None:
        """The update, unless the averaged gradients (the same on every rank) are not finite: then
        ``nonfinite`` stops (an error on every rank), skips or applies it with a warning."""
        def update() -> None:
            super(_DistributedMixin, self)._backend_update_step(  # type: ignore[misc]
                grads, trainable_variables, learning_rate)

        backend.guarded_update(self._hvdkit_finite, update, self._hvdkit_nonfinite, self.iterations,
                               self._hvdkit_bad_ranks)

    @property
    def _agg_helper(self) -> SimpleNamespace | None:
        """Horovod's private gradient-aggregation helper, as far as upstream's tests read it: ``counter`` is
        the number of backward passes accumulated since the last update (Keras 3's ``_iterations`` counts
        passes, ``iterations`` updates); None without ``backward_passes_per_step``, as Horovod's."""
        steps = self.gradient_accumulation_steps
        return SimpleNamespace(counter=self._iterations % steps) if steps else None


def _distributed_class(cls: type) -> type:
    if cls not in _CLASSES:
        # Same name and module as the base class: a saved model records the plain
        # optimizer (as horovod.keras did), and loads without hvdkit.
        _CLASSES[cls] = twin_class(_DistributedMixin, cls)
    return _CLASSES[cls]


def is_distributed(optimizer: Any) -> bool:
    """True for an optimizer that averages gradients over workers (one ``DistributedOptimizer`` returned)."""
    return bool(getattr(optimizer, "_hvdkit_distributed", False))


def DistributedOptimizer(optimizer: keras.optimizers.Optimizer, name: str | None = None, device_dense: str = "",
                         device_sparse: str = "", compression: Any = "none", sparse_as_dense: bool = False,
                         gradient_predivide_factor: float = 1.0, op: Any = "average",
                         backward_passes_per_step: int = 1, average_aggregated_gradients: bool = False,
                         num_groups: int = 0, groups: int | None = None, process_set: Any = None,
                         scale_local_gradients: bool = True, *, accumulate_steps: int | None = None,
                         nonfinite: str = "stop") -> keras.optimizers.Optimizer:
    """Return a copy of ``optimizer`` (same class, same config) whose updates use gradients
    averaged over all workers. Build the model with it before the first step.

    Horovod 0.28.1's ``horovod.tensorflow.keras.DistributedOptimizer`` signature and semantics, on Keras 3:
    ``compression`` and ``op`` take Horovod's objects (``hvd.Compression.fp16``, ``hvd.Average``,
    ``hvd.Sum``, ``hvd.Adasum``) or hvdkit's names (``"fp16"``, ``"average"``, ``"sum"``, ``"adasum"``);
    ``gradient_predivide_factor`` splits the averaging before and after the sum;
    ``backward_passes_per_step=N`` uses Keras's own gradient accumulation and communicates once every
    N steps, applying the sum of the N gradients (their mean with ``average_aggregated_gradients=True``),
    as Horovod does; ``groups=k`` (or ``num_groups``) reduces the gradients in ``k`` grouped allreduces;
    ``process_set`` reduces over that Horovod process set. ``name`` names the optimizer.
    ``scale_local_gradients`` is accepted for Horovod's signature (hvdkit's optimizer has no local variables).
    ``accumulate_steps`` is hvdkit's name for ``backward_passes_per_step`` (the one ``Trainer`` and
    ``distribute`` use); this function is also Horovod's ``hvd.DistributedOptimizer``, so both are accepted.

    ``nonfinite``: what an update whose averaged gradients hold a NaN or an inf does, on every rank alike:
    ``"stop"`` (default: an error before the update, naming the step and the ranks whose own gradients were
    not finite), ``"skip"`` or ``"warn"`` (apply it), as ``Trainer(nonfinite=...)`` in PyTorch.

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
    hvd = backend.hvd
    compression, op = resolve_reduction(hvd, compression, op)
    check_nonfinite(nonfinite)
    backward_passes_per_step = check_int("backward_passes_per_step", backward_passes_per_step, minimum=1)
    if accumulate_steps is not None:
        accumulate_steps = check_int("accumulate_steps", accumulate_steps, minimum=1)
        if backward_passes_per_step not in (1, accumulate_steps):
            raise ValueError(f"accumulate_steps={accumulate_steps} and backward_passes_per_step="
                             f"{backward_passes_per_step} name one setting (hvdkit's and Horovod's spelling): pass one")
        backward_passes_per_step = accumulate_steps
    check_number("gradient_predivide_factor", gradient_predivide_factor, minimum=0, strict_min=True)
    if gradient_predivide_factor != 1.0 and op != hvd.Average:
        raise ValueError(f"gradient_predivide_factor must be 1.0 with op other than Average, got "
                         f"{gradient_predivide_factor!r}")
    groups = groups if groups is not None else (num_groups or None)
    if groups is not None and (isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1):
        raise ValueError(f"groups must be a positive number of groups (hvdkit's Keras 3 optimizer does not take "
                         f"lists of variables), got {groups!r}")
    groups = None if groups is None else int(groups)
    del scale_local_gradients
    reduce = {
        "op": op, "compression": compression, "prescale_factor": 1.0 / gradient_predivide_factor,
        "postscale_factor": gradient_predivide_factor, "process_set": process_set, "sparse_as_dense": sparse_as_dense,
        "device_dense": device_dense, "device_sparse": device_sparse, "groups": groups}

    def wrap(inner: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
        return _wrap(inner, name, backward_passes_per_step, average_aggregated_gradients, reduce, nonfinite)

    scaled = agreed_loss_scaling(optimizer, wrap)
    return wrap(optimizer) if scaled is None else scaled


def _config_keeping_schedule(optimizer: keras.optimizers.Optimizer) -> dict[str, Any]:
    """``optimizer.get_config()`` whose ``learning_rate`` is the optimizer's own schedule (or callable) object.

    Keras serialises a schedule in ``get_config`` and rebuilds it in ``from_config``, which fails for a schedule
    class without ``get_config`` or not registered; the wrapped optimizer shares the object instead."""
    lr = getattr(optimizer, "_learning_rate", None)
    if not (isinstance(lr, keras.optimizers.schedules.LearningRateSchedule) or callable(lr)):
        return dict(optimizer.get_config())
    optimizer._learning_rate = 0.0  # a placeholder get_config does not serialise, put back at once
    try:
        config = dict(optimizer.get_config())
    finally:
        optimizer._learning_rate = lr
    config["learning_rate"] = lr
    return config


def _wrap(optimizer: keras.optimizers.Optimizer, name: str | None, backward_passes_per_step: int,
          average_aggregated_gradients: bool, reduce: dict[str, Any], nonfinite: str) -> keras.optimizers.Optimizer:
    """The distributed copy of a plain (checked) optimizer."""
    config = _config_keeping_schedule(optimizer)
    if name is not None:
        config["name"] = name
    if backward_passes_per_step > 1:
        if config.get("gradient_accumulation_steps"):
            raise ValueError("backward_passes_per_step must be 1 when the optimizer already sets "
                             f"gradient_accumulation_steps, got {backward_passes_per_step}")
        config["gradient_accumulation_steps"] = backward_passes_per_step
    dist_cls: Any = _distributed_class(type(optimizer))
    dist = dist_cls.from_config(config)
    dist._hvdkit_reduce = reduce
    dist._hvdkit_nonfinite = nonfinite
    if backward_passes_per_step > 1 and not average_aggregated_gradients:
        dist._hvdkit_scale = float(backward_passes_per_step)
    return dist
