"""The training engine: bookkeeping plus event dispatch, shared by every adapter.

A framework adapter (the PyTorch ``Trainer``, the Keras bridge callback, or a
hand-written loop) calls these methods at the matching points; the engine keeps
``TrainState`` right, applies the learning rate that the LR callbacks asked for
and fires the events. Nothing here knows about torch or TensorFlow.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from hvdkit.core import lr as lrmath
from hvdkit.core.callback import Callback
from hvdkit.core.comm import Comm
from hvdkit.core.dispatcher import Dispatcher
from hvdkit.core.events import Event
from hvdkit.core.state import FrameworkOps, TrainState

log = logging.getLogger("hvdkit")


class Engine:
    def __init__(self, comm: Comm, ops: FrameworkOps, callbacks: Iterable[Callback] = ()) -> None:
        self.dispatcher = Dispatcher(callbacks)
        self.state = TrainState(comm=comm, ops=ops)
        for cb in self.dispatcher.callbacks:
            cb.bind(self)

    @property
    def callbacks(self) -> list[Callback]:
        return self.dispatcher.callbacks

    def fire(self, event: Event) -> None:
        self.dispatcher.fire(event, self.state)

    # -- phases ---------------------------------------------------------------
    def train_begin(self, epochs: int, steps_per_epoch: int | None, initial_epoch: int = 0) -> None:
        s = self.state
        s.epochs = epochs
        s.steps_per_epoch = steps_per_epoch
        if initial_epoch and s.epoch == 0:
            s.epoch = initial_epoch
            s.global_step = initial_epoch * (steps_per_epoch or 0)
        if not s.extra.pop("restored_before_train", False):
            # The optimizer's LR as built is the target; a state restored before training
            # (Keras's Checkpoint.resume_epoch) already holds its target LR and world size.
            s.target_lr = s.ops.get_lr()
            s.target_world_size = s.comm.size
        s.stop_training = False
        self.fire(Event.TRAIN_BEGIN)  # a Checkpoint callback may restore epoch/step/target_lr here

    def epoch_begin(self, epoch: int | None = None) -> None:
        s = self.state
        if epoch is not None:
            s.epoch = epoch
        s.batch = 0
        s.logs = {}
        self.fire(Event.EPOCH_BEGIN)

    def batch_begin(self, batch: int | None = None, global_step: int | None = None) -> None:
        """``global_step``: set the step counter from the caller's own count (Keras), rather than
        relying on :meth:`batch_end` having advanced it (Keras may run batch-end hooks later, on
        another thread)."""
        s = self.state
        if batch is not None:
            s.batch = batch
        if global_step is not None:
            s.global_step = global_step
        self.fire(Event.BATCH_BEGIN)
        self.apply_lr()

    def batch_end(self, logs: Mapping[str, Any] | None = None, advance: bool = True) -> None:
        """``logs`` may hold 0-d tensors: they are converted only by callbacks that read them.
        ``advance=False`` leaves the counters to :meth:`batch_begin`/:meth:`epoch_end` callers."""
        s = self.state
        if advance:
            s.global_step += 1
        if logs:
            s.logs = dict(logs)
        self.fire(Event.BATCH_END)
        if advance:
            s.batch += 1

    def epoch_end(self, logs: Mapping[str, float] | None = None) -> dict[str, float]:
        s = self.state
        if logs is not None:
            s.logs = dict(logs)
        self.fire(Event.EPOCH_END)  # MetricAverage rewrites s.logs here
        for k, v in s.logs.items():
            s.history.setdefault(k, []).append(float(v))
        s.epoch += 1
        s.batch = 0
        self.fire(Event.EPOCH_SAVE)
        return dict(s.logs)

    def train_end(self) -> None:
        self.fire(Event.TRAIN_END)

    # -- learning rate --------------------------------------------------------
    def current_lr(self) -> float | None:
        s = self.state
        if not s.lr_factors or s.target_lr is None:
            return None
        return s.target_lr * math.prod(s.lr_factors.values())

    def apply_lr(self) -> None:
        """Set the optimizer's LR to ``target_lr * prod(lr_factors)`` when LR callbacks exist."""
        s = self.state
        new_lr = self.current_lr()
        if new_lr is None:
            return
        old_lr = s.last_applied_lr if s.last_applied_lr is not None else s.ops.get_lr()
        if new_lr == old_lr and s.last_applied_lr is not None:
            return
        if s.ops.lr_in_momentum and s.extra.get("momentum_correction", False) and old_lr > 0:
            s.ops.scale_momentum(lrmath.momentum_correction_factor(old_lr, new_lr))
        s.ops.set_lr(new_lr)
        s.last_applied_lr = new_lr

    def rescale_world(self, new_size: int) -> None:
        """After a resume or an elastic reset under another world size, follow the scaling rule."""
        s = self.state
        old = s.target_world_size
        if old == new_size or s.target_lr is None:
            return
        ratio = new_size / old
        log.warning(
            "world size changed from %d to %d: learning rate rescaled by %g (linear scaling rule)",
            old, new_size, ratio,
        )
        s.target_lr = lrmath.rescale_for_world_size(s.target_lr, old, new_size)
        s.ops.set_lr(lrmath.rescale_for_world_size(s.ops.get_lr(), old, new_size))
        s.target_world_size = new_size
        s.last_applied_lr = None
