"""Event names: each is the name of the callback method that handles it (Keras's ``on_<phase>_begin/end``),
so one callback reads the same under the PyTorch trainer, a Keras ``model.fit`` or a hand-written loop."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    """A point in training at which callbacks run, in the order they occur.

    Each member's ``__doc__`` says when it fires and which parts of
    :class:`~hvdkit.core.state.TrainState` are valid then. A run is::

        TRAIN_BEGIN
        per epoch: EPOCH_BEGIN, (BATCH_BEGIN, BATCH_END) per step,
                   [EVAL_BEGIN, EVAL_END when there is validation data], EPOCH_END, EPOCH_SAVE
        TRAIN_END                          (also after an error; then Callback.close())
    """

    TRAIN_BEGIN = "on_train_begin"
    EPOCH_BEGIN = "on_epoch_begin"
    BATCH_BEGIN = "on_batch_begin"
    BATCH_END = "on_batch_end"
    EVAL_BEGIN = "on_eval_begin"
    EVAL_END = "on_eval_end"
    EPOCH_END = "on_epoch_end"
    EPOCH_SAVE = "on_epoch_save"
    TRAIN_END = "on_train_end"
    CHECKPOINT_SAVED = "on_checkpoint_saved"
    CHECKPOINT_RESTORED = "on_checkpoint_restored"
    COMMIT = "on_commit"
    RESET = "on_reset"

    @property
    def method_name(self) -> str:
        """The callback method this event calls."""
        return self.value


_WHEN = {
    Event.TRAIN_BEGIN: "Fires once when a run starts, before the first epoch. Valid: ``comm``, ``epochs``, "
                       "``steps_per_epoch``, ``target_lr``; a ``Checkpoint`` callback restores ``epoch``, "
                       "``global_step`` and callback states here (lower ``order`` first).",
    Event.EPOCH_BEGIN: "Fires at the start of each epoch. Valid: ``epoch`` (0-based), ``batch`` is 0, ``logs`` "
                       "is empty.",
    Event.BATCH_BEGIN: "Fires before each optimizer step. Valid: ``epoch``, ``batch``, ``global_step`` (steps "
                       "done before this one); LR callbacks set ``lr_factors`` here, applied right after.",
    Event.BATCH_END: "Fires after each optimizer step. Valid: ``logs`` holds the step's logs (values may be "
                     "0-d tensors); ``global_step`` counts this step. Under Keras it may run late, on "
                     "another thread.",
    Event.EVAL_BEGIN: "Fires before validation, after the epoch's last step, on every rank (only when the "
                      "run has validation data). Valid: ``epoch`` (the epoch being validated), ``logs`` "
                      "holds the epoch's training logs (under Keras, the last step's: Keras's running "
                      "epoch means).",
    Event.EVAL_END: "Fires after validation, before ``EPOCH_END``. Valid: ``logs`` holds the epoch's "
                    "training logs plus the validation results, named as in the epoch logs (``val_loss``, "
                    "``val_<metric>``; exact over ranks from the torch Trainer, this rank's from Keras "
                    "until ``MetricAverage`` averages the epoch logs).",
    Event.EPOCH_END: "Fires after each epoch (and its validation). Valid: ``logs`` holds the epoch's logs, "
                     "``val_*`` included; averaging callbacks (``MetricAverage``) rewrite them here.",
    Event.EPOCH_SAVE: "Fires after ``EPOCH_END`` once the epoch's logs are final (averaged, in ``history``) "
                      "and ``epoch`` counts the finished epoch: the point at which a checkpoint captures a "
                      "consistent state.",
    Event.TRAIN_END: "Fires once when a run ends, also after an error (adapters call it in ``finally``); "
                     "``history`` holds the run's epochs. Resources are released after it, in "
                     ":meth:`Callback.close <hvdkit.core.callback.Callback.close>`.",
    Event.CHECKPOINT_SAVED: "Fires after a checkpoint was written (or handed to the background writer).",
    Event.CHECKPOINT_RESTORED: "Fires after a checkpoint was restored: counters, LR and callback states are "
                               "the checkpoint's.",
    Event.COMMIT: "Elastic training committed its state in memory (``epoch``, ``batch``, ``global_step`` "
                  "are what a rollback returns to).",
    Event.RESET: "Elastic training reset after workers left or joined: ``comm.size`` is the new size and "
                 "the state is the last commit's, rescaled to it.",
}
for _event, _doc in _WHEN.items():
    _event.__doc__ = _doc
