"""Event names: each is the name of the callback method that handles it.

Follows MosaicML Composer's ``core/event.py`` idea (events are hook names) with
Keras's ``on_<phase>_begin/end`` spelling, so one callback class reads the same
whether the PyTorch trainer, a Keras ``model.fit`` or a hand-written loop fires it.
"""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    """A point in training at which callbacks run, in the order they occur."""

    TRAIN_BEGIN = "on_train_begin"
    EPOCH_BEGIN = "on_epoch_begin"
    BATCH_BEGIN = "on_batch_begin"
    BATCH_END = "on_batch_end"
    EPOCH_END = "on_epoch_end"
    TRAIN_END = "on_train_end"
    # Checkpointing: EPOCH_SAVE is fired after EPOCH_END, once the epoch's logs are
    # final (averaged, in the history) and ``state.epoch`` counts the finished epoch:
    # the point at which a checkpoint captures a consistent state.
    EPOCH_SAVE = "on_epoch_save"
    # Fired after a checkpoint was written / after one was restored.
    CHECKPOINT_SAVED = "on_checkpoint_saved"
    CHECKPOINT_RESTORED = "on_checkpoint_restored"
    # Elastic training: state was committed / rolled back after a world change.
    COMMIT = "on_commit"
    RESET = "on_reset"

    @property
    def method_name(self) -> str:
        """The callback method this event calls."""
        return self.value
