"""The training engine: bookkeeping plus event dispatch, shared by every adapter.

A framework adapter (the PyTorch ``Trainer``, the Keras bridge callback, the elastic loop, or a
hand-written loop) calls these methods at the matching points; the engine keeps ``TrainState``
right, owns the learning rate (the target LR, the world size it is scaled for, and the LR set
before each batch) and fires the events. Nothing here knows about torch or TensorFlow.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping

from hvdkit.core import hang_report
from hvdkit.core import lr as lrmath
from hvdkit.core.callback import Callback
from hvdkit.core.comm import Comm
from hvdkit.core.dispatcher import Dispatcher
from hvdkit.core.events import Event
from hvdkit.core.state import FrameworkOps, TrainState
from hvdkit.core.types import Logs, Snapshot

log = logging.getLogger("hvdkit")


class Engine:
    """Runs one training run's callbacks and keeps its :class:`TrainState`.

    ``dispatcher`` holds the callbacks (sorted by ``order``); ``state`` is what they read.
    ``driver`` is whoever calls the phase methods in the current run (the Keras bridge callback that
    drives ``model.fit``, or the elastic loop): other callers then only register callbacks.
    ``elastic`` is the :class:`~hvdkit.core.elastic.loop.ElasticLoop` running this engine in a
    ``fit_elastic`` run (the engine only checks that there is one: the loop imports the engine,
    not the other way round).

    The phase methods, in the order a loop calls them::

        engine.train_begin(epochs, steps_per_epoch)
        for epoch in range(engine.state.epoch, epochs):
            engine.epoch_begin(epoch)
            for i, batch in enumerate(loader):
                engine.batch_begin(i)
                ...forward, backward, optimizer step...
                engine.batch_end({"loss": loss})
            engine.eval_begin({"loss": epoch_loss})          # with validation data only
            logs = engine.eval_end({"val_loss": val_loss})
            engine.epoch_end(logs)
        engine.train_end()                                   # in a finally
    """

    def __init__(self, comm: Comm, ops: FrameworkOps, callbacks: Iterable[Callback] = ()) -> None:
        self.dispatcher = Dispatcher(callbacks)
        self.state = TrainState(comm=comm, ops=ops)
        self.driver: object | None = None
        self.elastic: object | None = None
        # Set by a loop that resumes inside an epoch (skips the steps a checkpoint's ``state.batch`` says
        # are done): only there does Checkpoint(on_signal=...) stop at a step's end and save it.
        self.resumes_mid_epoch = False
        self._warned_rescale: tuple[int, int] | None = None
        for cb in self.dispatcher.callbacks:
            cb.bind(self)

    @property
    def callbacks(self) -> list[Callback]:
        """The callbacks, in the order they run."""
        return self.dispatcher.callbacks

    def register(self, callback: Callback) -> None:
        """Add ``callback`` (once) and keep the callbacks sorted by ``order``."""
        if self.dispatcher.add(callback):
            callback.bind(self)

    def fire(self, event: Event) -> None:
        """Run every callback's hook for ``event``."""
        s = self.state
        # Keras may run batch-end hooks late, on another thread: only the others tell which thread trains.
        hang_report.heartbeat(s.global_step, s.epoch, thread=event is not Event.BATCH_END,
                              step_begins=event is Event.BATCH_BEGIN)
        self.dispatcher.fire(event, s)

    # -- phases ---------------------------------------------------------------
    def train_begin(self, epochs: int, steps_per_epoch: int | None, initial_epoch: int = 0,
                    agree: Mapping[str, object] | None = None) -> None:
        """Start a run of ``epochs`` epochs; a ``Checkpoint`` callback may resume it here.

        First every rank checks that all ranks will run the same number of epochs and steps per epoch
        (and whatever else ``agree`` names, e.g. whether there is validation data): a rank with one
        step more would wait forever in a collective nobody else joins. A disagreement raises the same
        ValueError on every rank, naming each rank's value.
        """
        s = self.state
        if s.elastic and self.elastic is None:
            raise RuntimeError(
                "this process was started by Horovod's elastic driver (horovodrun --min-np/--max-np): train "
                "with fit_elastic (hvdkit.torch.fit_elastic, hvdkit.keras.fit_elastic), which commits and restores "
                "state when workers leave or join; fit would start from unsynchronised weights and die with "
                "the first lost worker")
        hang_report.set_in_run(True)  # before the agreement: a rank that never reaches it is a hang
        if not s.elastic:  # under the elastic loop every worker derives the steps from one formula
            self.check_ranks_agree({"epochs": epochs, "steps per epoch": steps_per_epoch, **(agree or {})})
        s.epochs = epochs
        s.steps_per_epoch = steps_per_epoch
        if initial_epoch and s.epoch == 0:
            s.epoch = initial_epoch
            s.global_step = initial_epoch * (steps_per_epoch or 0)
        if s.resumed_epoch is None:
            # The optimizer's LR as built is the target. A state restored before training (Keras's
            # Checkpoint.resume_epoch) already holds its target LR.
            self.set_lr_target(s.ops.get_lr(), s.comm.size)
        s.stop_training = False
        self.fire(Event.TRAIN_BEGIN)  # a Checkpoint callback may restore epoch/step/target_lr here

    def epoch_begin(self, epoch: int | None = None) -> None:
        """Start epoch ``epoch`` (default: ``state.epoch``) at batch 0."""
        s = self.state
        if epoch is not None:
            s.epoch = epoch
        s.batch = 0
        s.logs = {}
        self.fire(Event.EPOCH_BEGIN)

    def batch_begin(self, batch: int | None = None, global_step: int | None = None) -> None:
        """Before a training step: fire ``on_batch_begin``, then set the LR the LR callbacks asked for.

        ``global_step``: set the step counter from the caller's own count (Keras, the elastic loop)
        rather than relying on :meth:`batch_end` having advanced it (Keras may run batch-end hooks
        later, on another thread)."""
        s = self.state
        if batch is not None:
            s.batch = batch
        if global_step is not None:
            s.global_step = global_step
        self.fire(Event.BATCH_BEGIN)
        self.apply_lr()

    def batch_end(self, logs: Logs | None = None, advance: bool = True) -> None:
        """After a training step; ``logs`` may hold 0-d tensors (converted only by callbacks that read them).

        With ``advance`` (batch hooks that run in step, on the training thread), ``state.global_step``
        counts the steps done including this one during ``on_batch_end``, and the batch index moves on
        after it. ``advance=False`` leaves the counters alone: for callers that set them in
        :meth:`batch_begin` and whose batch ends may run late, on another thread (Keras's asynchronous
        callback dispatch), where writing them would race with the next step's begin.
        """
        s = self.state
        if advance:
            s.global_step += 1
        if logs:
            s.logs = dict(logs)
        self.fire(Event.BATCH_END)
        if advance:
            s.batch += 1

    def epoch_end(self, logs: Mapping[str, float] | None = None) -> dict[str, float]:
        """End the epoch: callbacks see (and ``MetricAverage`` averages) ``logs``, the history gets
        them, ``state.epoch`` moves on, then ``on_epoch_save`` fires. Returns the final logs."""
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

    def eval_begin(self, logs: Mapping[str, float] | None = None) -> None:
        """Before validation: ``logs`` (the epoch's training logs, if given) in ``state.logs``, then
        ``on_eval_begin``."""
        if logs is not None:
            self.state.logs = dict(logs)
        self.fire(Event.EVAL_BEGIN)

    def eval_end(self, val_logs: Mapping[str, float]) -> dict[str, float]:
        """After validation: ``val_logs`` (named ``val_*``) join ``state.logs``, then ``on_eval_end``;
        returns the logs with them."""
        s = self.state
        s.logs = {**s.logs, **val_logs}
        self.fire(Event.EVAL_END)
        return dict(s.logs)

    def train_end(self) -> None:
        """End the run (also after an exception: adapters call it in ``finally``): ``on_train_end``, then
        every callback's ``close()``, which runs even when ``on_train_end`` raised."""
        s = self.state
        try:
            self.fire(Event.TRAIN_END)
        finally:
            hang_report.set_in_run(False)
            s.resumed_epoch = None
            self.dispatcher.close()

    def check_ranks_agree(self, facts: Mapping[str, object]) -> None:
        """Raise a ValueError on every rank if ranks differ on any of ``facts`` (one allgather)."""
        comm = self.state.comm
        if comm.size == 1:
            return
        seen = comm.allgather_object(dict(facts))
        for name in facts:
            values = [f.get(name) for f in seen]
            if len(set(map(repr, values))) > 1:
                per_rank = ", ".join(f"rank {r}: {v!r}" for r, v in enumerate(values))
                raise ValueError(
                    f"ranks disagree on {name} ({per_rank}): every rank must run the same epochs and steps, "
                    "or the first collective of a rank with more waits forever for the others. Give every rank "
                    "the same number of batches (hvdkit's shard() gives every rank the same number of rows; "
                    "or drop_last=True) and the same arguments")

    # -- learning rate --------------------------------------------------------
    def current_lr(self) -> float | None:
        """``target_lr * prod(lr_factors)``, or None when no LR callback asked for a factor."""
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
        if s.last_applied_lr is not None and math.isclose(new_lr, old_lr, rel_tol=1e-12):
            return  # rounding alone (a rescaled LR times a factor) changes nothing another callback set
        if s.ops.lr_in_momentum and s.momentum_correction and old_lr > 0:
            s.ops.scale_momentum(lrmath.momentum_correction_factor(old_lr, new_lr))
        s.ops.set_lr(new_lr)
        s.last_applied_lr = new_lr

    def set_lr_target(self, target_lr: float | None, scaled_for: int, optimizer_lr: float | None = None,
                      scaled_for_batch: Mapping[str, int] | None = None, last_applied_lr: float | None = None) -> None:
        """The one place where the target LR and the world size it is scaled for change.

        ``target_lr`` (and ``optimizer_lr``, the LR to give the optimizer now, if any) were scaled
        for ``scaled_for`` workers, or for the global batch ``scaled_for_batch`` (world size, batch per
        rank, accumulation steps) where both it and ``state.global_batch`` are known. Both are rescaled by
        the linear scaling rule (the ratio of the global batches, else of the world sizes), with a
        warning (once per change) when they differ.
        """
        s = self.state
        size = s.comm.size
        if scaled_for_batch and s.global_batch:
            old, new = lrmath.global_batch_size(scaled_for_batch), lrmath.global_batch_size(s.global_batch)
            what = (f"global batch changed from {lrmath.describe_global_batch(scaled_for_batch)} to "
                    f"{lrmath.describe_global_batch(s.global_batch)}")
        else:
            old, new, what = scaled_for, size, f"world size changed from {scaled_for} to {size}"
        if old != new and (old, new) != self._warned_rescale:
            self._warned_rescale = (old, new)
            if s.is_root:
                log.warning("%s: learning rate rescaled by %g (linear scaling rule)", what, new / old)
        s.target_lr = None if target_lr is None else lrmath.rescale_for_world_size(target_lr, old, new)
        s.target_world_size = size
        if optimizer_lr is not None:
            s.ops.set_lr(lrmath.rescale_for_world_size(optimizer_lr, old, new))
        # What the engine last gave the optimizer, if known: the next apply_lr leaves an LR that another
        # callback lowered since (ReduceLROnPlateau) alone, as the uninterrupted run did.
        s.last_applied_lr = (None if last_applied_lr is None else last_applied_lr if old == new
                             else lrmath.rescale_for_world_size(last_applied_lr, old, new))

    def restore_progress(self, counters: Snapshot, callback_states: Snapshot, *, world_size: int,
                         optimizer_lr: float) -> None:
        """Put the run back where a checkpoint or an elastic commit left it, for the current world:
        counters and callback states as saved; target and optimizer LR, saved for ``world_size``
        workers (and the counters' ``global_batch``), rescaled to the current global batch."""
        self.state.load_counters(counters)
        self.dispatcher.load_state_dict(callback_states)
        self.set_lr_target(counters.get("target_lr"), world_size, optimizer_lr=optimizer_lr,
                           scaled_for_batch=counters.get("global_batch"),
                           last_applied_lr=counters.get("last_applied_lr"))
        saved = counters.get("global_batch")
        if self.resumes_mid_epoch and not self.state.elastic and self.state.batch and saved:
            self._resume_inside_epoch(saved)

    def _resume_inside_epoch(self, saved: Mapping[str, int]) -> None:
        """A checkpoint written inside an epoch (on a stop signal) counts that epoch's steps done in its own
        global batch. Under another one (world size, batch per rank or accumulation changed), skip as many
        steps as cover the samples already trained, never the whole epoch, and say that this epoch's rest
        follows the new sharding: the steps of the old one would run past the end of the new epoch."""
        s = self.state
        now = s.global_batch
        if not now or {k: int(v) for k, v in saved.items()} == {k: int(v) for k, v in now.items()}:
            return
        done = s.batch * lrmath.global_batch_size(saved)
        skip = done // lrmath.global_batch_size(now)
        if s.steps_per_epoch:
            skip = min(skip, s.steps_per_epoch - 1)
        if s.is_root:
            log.warning("resuming inside epoch %d with another global batch (%s, was %s): %d samples of it were "
                        "trained, so this run skips its first %d steps of %s; the rest of the epoch is this world's "
                        "shard order, so a few of its samples may be trained twice or not at all",
                        s.epoch, lrmath.describe_global_batch(now), lrmath.describe_global_batch(saved), done,
                        skip, s.steps_per_epoch if s.steps_per_epoch else "the epoch")
        s.batch = skip
