"""Checkpointing: rank 0 writes atomically (keep-N, checksummed); resume broadcasts to all ranks."""

from __future__ import annotations

import copy
import logging
import os
import signal
from typing import Any

from hvdkit.core.background_save import BackgroundSave
from hvdkit.core.callback import Callback
from hvdkit.core.checkpoint_store import CheckpointStore, Manifest, new_run_id
from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.preemption import StopSignals
from hvdkit.core.process_set import check_process_set, scoped
from hvdkit.core.resume_settings import changed_settings
from hvdkit.core.state import TrainState
from hvdkit.core.types import Snapshot
from hvdkit.core.validation import check_bool, check_choice, check_int

log = logging.getLogger("hvdkit")


class Checkpoint(Callback):
    """Save model, optimizer, counters, callback states and RNG every ``every_n_epochs`` epochs.

    With ``resume=True`` training starts from the newest checkpoint whose checksum verifies: rank 0
    reads it and broadcasts it, and the run keeps that checkpoint's run identity; a different world
    size rescales the LR by the linear scaling rule. With ``resume=False`` the folder must hold no
    other run's checkpoints.

    ``async_save=True``: the training thread only copies the state to host memory; the durable write
    runs on a background thread (one at a time), and its error is raised at the next save or at the
    end of training. Before the first step rank 0 checks the folder is writable and removes dead
    writers' temporary files. The format (safetensors plus JSON, no pickle) is docs/checkpoint-format.md;
    a format-3 folder is refused with the ``hvdkit checkpoint convert DIR`` command. ``trust_pickle``
    has no effect, kept for compatibility.

    ``process_set=``: the set's first rank writes and reads, and resuming broadcasts within the set
    (hybrid parallelism: ``Checkpoint(f"ckpt/stage{s}", process_set=dp_set)``).

    ``on_signal``: what SIGTERM or SIGUSR1 to a rank (or to ``horovodrun``, which passes it on) does in
    a loop that resumes inside an epoch (the PyTorch ``Trainer``). ``"save"`` (default): every rank ends
    the step it is in, rank 0 writes a checkpoint of it and every process exits with status 128 + the
    signal; a rerun resumes at the next step. ``"keep"``: stop the same way, keep the last checkpoint.
    ``"off"``, and in other loops (Keras's ``fit``, hand-written ones): Python's default, the process dies
    at once. A second signal, or ``HVDKIT_STOP_GRACE`` seconds (default 30) without stopping, ends the
    process at once.
    """

    order = -100  # restore before any callback reads the state

    def __init__(self, directory: str | os.PathLike[str], every_n_epochs: int = 1, keep: int = 3,
                 resume: bool = True, trust_pickle: bool = False, async_save: bool = True,
                 process_set: Any = None, on_signal: str = "save") -> None:
        if not isinstance(directory, (str, os.PathLike)) or not str(directory):
            raise ValueError(f"directory must be a non-empty path, got {directory!r}")
        self.every_n_epochs = check_int("every_n_epochs", every_n_epochs, minimum=1)
        self.store = CheckpointStore(directory, keep=keep)
        self.resume = check_bool("resume", resume)
        self.trust_pickle = check_bool("trust_pickle", trust_pickle)
        self.async_save = check_bool("async_save", async_save)
        self.process_set = check_process_set(process_set)
        self.on_signal = check_choice("on_signal", on_signal, ("save", "keep", "off"))
        self._signals: StopSignals | None = None
        self._stopping = False
        self._writer = BackgroundSave()
        if self.trust_pickle:
            log.warning("Checkpoint(trust_pickle=True) has no effect: checkpoints hold no pickle (safetensors + "
                        "JSON); to convert pickled checkpoints of an older hvdkit use `hvdkit checkpoint convert "
                        "--trust-pickle %s`", self.store.directory)
        self.run_id: str | None = None
        self.restored: Manifest | None = None
        self.last_saved: Manifest | None = None
        self._engine: Engine | None = None

    @property
    def directory(self) -> os.PathLike[str]:
        """The checkpoint folder."""
        return self.store.directory

    def bind(self, engine: Engine) -> None:
        """Remember the engine: its callbacks' states go into every checkpoint."""
        self._engine = engine

    @property
    def engine(self) -> Engine:
        """The engine this checkpoint belongs to (set when training starts)."""
        if self._engine is None:
            raise RuntimeError("Checkpoint is not attached to a training run yet (pass it in callbacks)")
        return self._engine

    # -- saving ---------------------------------------------------------------
    def snapshot(self, state: TrainState) -> Snapshot:
        """Model, optimizer and RNG state, counters and callback states: a copy training cannot change
        (the framework's part through ``FrameworkOps.capture_staged``)."""
        return {
            "framework": state.ops.capture_staged(),
            "counters": copy.deepcopy(state.counters()),
            "callbacks": copy.deepcopy(self.engine.dispatcher.state_dict()),
        }

    def save(self, state: TrainState) -> Manifest | None:
        """Write a checkpoint (rank 0 only; other ranks return None). With ``async_save`` the write runs
        in the background and this returns None at once; :meth:`wait` returns its manifest."""
        if not scoped(state.comm, self.process_set).is_root:  # the set's first rank writes
            return None
        weights_finite = getattr(state.ops, "weights_finite", None)
        if weights_finite is not None and not weights_finite():
            # Never written: keep-N retention would then delete the finite checkpoints it replaces.
            kept = self.last_saved.payload if self.last_saved is not None else "none written by this run"
            log.warning("%s: not saving epoch %d (step %d): the model's weights hold NaN or inf; the last finite "
                        "checkpoint stays (%s)", self._where(), state.epoch, state.global_step, kept)
            return None
        if self.run_id is None:
            self.run_id = new_run_id()
        self._writer.wait()  # one write in flight at most; a failed one is raised here
        snap = self.snapshot(state)  # a copy in host memory: training may go on changing the model
        ops, store, run_id = state.ops, self.store, self.run_id
        epoch, step, world = state.epoch, state.global_step, state.target_world_size

        def write() -> Manifest:
            tree, payload = ops.dump(snap)
            return store.save(payload, state=tree, epoch=epoch, global_step=step, world_size=world,
                              framework=ops.name, run_id=run_id)

        if not self.async_save:
            self.last_saved = write()
            return self.last_saved
        self._writer.submit(write, done=self._saved)
        return None

    def _saved(self, manifest: Manifest) -> None:
        self.last_saved = manifest

    def wait(self) -> Manifest | None:
        """Wait for a background save to be durable (raising its error, naming the file); return the
        manifest of the last checkpoint written."""
        self._writer.wait()
        return self.last_saved

    def on_epoch_save(self, state: TrainState) -> None:
        """Save every ``every_n_epochs`` epochs and after the last one."""
        last = bool(state.epochs) and state.epoch >= state.epochs
        if state.epoch % self.every_n_epochs == 0 or last:
            self.save(state)
            self.engine.fire(Event.CHECKPOINT_SAVED)

    def on_train_end(self, state: TrainState) -> None:
        """Wait for the background write and the deletion of old checkpoints: when ``fit`` returns, the
        last checkpoint is durable and the folder holds the ``keep`` newest."""
        if self._signals is not None and not self._stopping:  # a stopping process keeps them until it is gone:
            self._signals.uninstall()                        # a late signal must not kill it mid-exit
            self._signals = None
        try:
            self._writer.wait()
        finally:
            self.store.flush()

    # -- stop signals ---------------------------------------------------------------
    def on_batch_end(self, state: TrainState) -> None:
        """Stop after this step when any rank received a stop signal (every rank asks the others, every step)."""
        if self._signals is not None and (received := self._signals.agreed(state.comm)) is not None:
            self._stop(state, received)

    def _stop(self, state: TrainState, signum: int) -> None:
        """Every rank: rank 0 writes this step's checkpoint (``on_signal="save"``), all wait until it is
        durable (or failed), then exit with 128 + the signal."""
        signals, self._stopping = self._signals, True
        writer = scoped(state.comm, self.process_set).is_root
        name = signal.Signals(signum).name
        before = written = error = None
        if self.on_signal == "save":
            state.batch += 1  # this step is done: a resume starts at the next one
        if self.on_signal == "save" and writer and signals is not None:
            signals.outcome = (f"while the checkpoint of step {state.global_step} was still being written (it "
                               "stays incomplete and is never resumed; the earlier ones stay whole)")
        try:
            before = self.wait()  # an epoch's write still in flight is durable first, and named below
            if self.on_signal == "save":
                self.save(state)
                written = self.wait()
        except Exception as exc:  # raised after the agreement below: the peers must not wait for it
            error = exc
        if written is before:  # nothing new (e.g. the weights are not finite): say so, not the old name
            written = None
        if writer and signals is not None:
            signals.outcome = f"after writing {written.payload}" if written else "without a new checkpoint"
        if state.comm.size > 1:
            # no rank exits (ending the job) before the write is durable or has failed
            state.comm.allreduce_mean({"saved": float(error is None)})
        if error is not None:
            raise error
        if writer:
            last = f"the last is {before.payload}" if before is not None else "none was written by this run"
            if written is not None:
                outcome = f"wrote {written.payload}"
            elif self.on_signal == "keep":
                outcome = f"no new checkpoint (on_signal='keep'; {last})"
            else:
                outcome = f"no new checkpoint ({last})"
            log.warning("%s: stopped after step %d (epoch %d); %s", name, state.global_step, state.epoch, outcome)
        raise SystemExit(128 + signum)

    # -- starting and resuming ---------------------------------------------------
    def _where(self) -> str:
        return f"Checkpoint(directory={str(self.store.directory)!r})"

    def _prepare(self, state: TrainState) -> tuple[Any, ...]:
        """Rank 0: what to resume, or the problem to raise on every rank (never a silent fresh start)."""
        try:
            found = self.store.start(self.resume, state.ops.name)
        except OSError as exc:
            return ("error", f"{self._where()}: {exc.strerror or exc}")
        except ValueError as exc:  # OldFormatError too
            return ("error", f"{self._where()}: {exc}")
        return ("fresh",) if found is None else ("resume", found.manifest, found.state, found.data)

    def load_latest(self, state: TrainState) -> Manifest | None:
        """Rank 0 prepares the folder and reads the newest valid checkpoint; every rank gets it (or the
        problem, raised on every rank); returns its manifest. Under elastic training only rank 0 loads,
        with no collective: the first sync hands it on, and a late joiner never waits alone."""
        self._writer.wait()  # a save still in flight is part of what may be resumed
        comm = scoped(state.comm, self.process_set)  # all ranks, or the process set
        outcome = self._prepare(state) if comm.is_root else None
        if not state.elastic:
            outcome = comm.broadcast_object(outcome, 0)
        elif not comm.is_root:
            return None
        assert outcome is not None
        if outcome[0] == "error":
            raise ValueError(outcome[1])
        if outcome[0] == "fresh":
            self.run_id = new_run_id()
            return None
        manifest, tree, data = outcome[1], outcome[2], outcome[3]
        code_lr, code_settings = state.ops.get_lr(), _hyperparameters(state)
        try:
            snap = state.ops.loads(tree, data)
            state.ops.restore(snap["framework"])
        except Exception as exc:
            raise ValueError(f"{self._where()}: checkpoint {manifest.payload} cannot be loaded: {exc}") from exc
        self.engine.restore_progress(snap["counters"], snap.get("callbacks", {}), world_size=manifest.world_size,
                                     optimizer_lr=state.ops.get_lr())
        if comm.is_root:
            self._warn_changed(manifest, code_lr, code_settings, state)
        state.resumed_epoch = state.epoch
        if comm.is_root:
            log.info("resumed from %s (epoch %d, step %d)", manifest.payload, manifest.epoch, manifest.global_step)
        self.run_id = manifest.run_id
        self.restored = manifest
        return manifest

    def _warn_changed(self, manifest: Manifest, code_lr: float, code: Snapshot, state: TrainState) -> None:
        """The checkpoint's optimizer settings win on resume (the run goes on as it was): name each that
        differs from the code's. The LR compared is the target LR, rescaled for this run's global batch."""
        saved = {**_hyperparameters(state), "learning rate": state.target_lr}
        code = {**code, "learning rate": code_lr}
        changed = changed_settings(code, saved)
        if changed:
            log.warning("%s: resuming %s, whose optimizer settings replace the code's (the checkpoint wins): %s. "
                        "To train with the code's values, start a fresh run (another directory, or resume=False)",
                        self._where(), manifest.payload, "; ".join(changed))

    def on_train_begin(self, state: TrainState) -> None:
        """Check the folder and, with ``resume``, restore the newest valid checkpoint (once per run)."""
        # Only a loop that resumes mid-epoch stops at a step's end: elsewhere the per-step agreement
        # would run on whatever thread runs batch hooks (Keras's asynchronous dispatch).
        if self.on_signal != "off" and self.engine.resumes_mid_epoch and not state.elastic and self._signals is None:
            signals = StopSignals()
            if not scoped(state.comm, self.process_set).is_root:
                signals.outcome = "(checkpoints are written by rank 0: its log says whether one was)"
            self._signals = signals if signals.install() else None
        if self.restored is not None or self.run_id is not None:
            return  # this run already started (an earlier fit, or Keras's resume_epoch)
        if self.load_latest(state) is not None:
            self.engine.fire(Event.CHECKPOINT_RESTORED)

    def __repr__(self) -> str:
        return (f"Checkpoint({str(self.store.directory)!r}, every_n_epochs={self.every_n_epochs}, "
                f"keep={self.store.keep}, async_save={self.async_save}, on_signal={self.on_signal!r})")


def _hyperparameters(state: TrainState) -> Snapshot:
    """The optimizer's settings other than the LR (empty for ops that cannot tell)."""
    read = getattr(state.ops, "hyperparameters", None)
    return dict(read()) if read is not None else {}

