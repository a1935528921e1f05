"""Horovod's LR callbacks (hvdkit.compat.horovod.callbacks) on the engine, against Horovod 0.28.1's semantics.

Expected LRs come from Horovod's formulas (horovod/_keras/callbacks.py, LearningRateScheduleCallbackImpl and
LearningRateWarmupCallbackImpl): in range ``[start_epoch, end_epoch)`` a callback sets the LR to
``initial_lr * multiplier(epoch)``, out of range it leaves the LR alone; the last callback in range wins.
"""

import pytest
from fakes import DictOps, run_epochs

from hvdkit.callbacks import LearningRateSchedule
from hvdkit.compat.horovod.callbacks import LearningRateScheduleCallback, LearningRateWarmupCallback
from hvdkit.core import Callback, Engine, LocalComm


class LrPerBatch(Callback):
    """The optimizer's LR during every batch (read after the engine applied it)."""

    def __init__(self):
        self.lrs = []

    def on_batch_end(self, state):
        self.lrs.append(state.ops.get_lr())


def lrs_of(callbacks, *, size=2, lr=0.5, epochs, steps, lr_in_momentum=False):
    rec = LrPerBatch()
    ops = DictOps(lr=lr, lr_in_momentum=lr_in_momentum)
    run_epochs(Engine(LocalComm(size=size), ops, [*callbacks, rec]), epochs=epochs, steps=steps)
    return rec.lrs, ops


def test_upstream_warmup_then_three_consecutive_schedules():
    """upstream test_tensorflow2_keras.py::test_train_model_lr_schedule's callbacks, every batch of 20 epochs."""
    n, S = 2, 5
    initial_lr = 0.1 * n

    def linear_multiplier(epoch):
        return epoch

    cbs = [LearningRateWarmupCallback(initial_lr=initial_lr, warmup_epochs=5),
           LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=1e-1, start_epoch=5, end_epoch=10),
           LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=1e-2, start_epoch=10, end_epoch=15),
           LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=linear_multiplier, start_epoch=15,
                                        end_epoch=20)]
    lrs, _ = lrs_of(cbs, size=n, lr=0.001, epochs=20, steps=S)
    expected = []
    for e in range(20):
        for b in range(S):
            if e < 5:  # Horovod's warm-up: initial_lr / n * ((e + (b + 1) / S) * (n - 1) / W + 1)
                expected.append(initial_lr / n * ((e + (b + 1) / S) * (n - 1) / 5 + 1))
            elif e < 10:
                expected.append(initial_lr * 0.1 ** (e - 5))
            elif e < 15:
                expected.append(initial_lr * 0.01 ** (e - 10))
            else:
                expected.append(initial_lr * e)
    assert lrs == pytest.approx(expected, rel=1e-12)
    assert lrs[15 * S] == pytest.approx(3.0)  # epoch 15: initial_lr * 15 (the defect gave 3e-12)


def test_lr_is_untouched_before_any_range_and_keeps_its_value_after_one():
    cbs = [LearningRateScheduleCallback(initial_lr=1.0, multiplier=0.5, start_epoch=2, end_epoch=4)]
    lrs, _ = lrs_of(cbs, lr=0.3, epochs=6, steps=2)
    assert lrs == pytest.approx([0.3] * 4 + [1.0] * 2 + [0.5] * 2 + [0.5] * 4)


def test_overlapping_ranges_the_last_callback_in_range_wins_and_staircase_sets_at_batch_0_only():
    cbs = [LearningRateScheduleCallback(initial_lr=1.0, multiplier=lambda e: 2.0, start_epoch=0, end_epoch=3),
           LearningRateScheduleCallback(initial_lr=1.0, multiplier=lambda e: 3.0, start_epoch=1, end_epoch=2)]
    assert lrs_of(cbs, epochs=3, steps=2)[0] == pytest.approx([2, 2, 3, 3, 2, 2])
    # a fractional (every-batch) schedule before a staircase one: the staircase one wins at batch 0 only
    cbs = [LearningRateWarmupCallback(initial_lr=1.0, warmup_epochs=2),
           LearningRateScheduleCallback(initial_lr=1.0, multiplier=lambda e: 10.0, start_epoch=1, end_epoch=2)]
    warm = [0.5 * ((k + 1) / 2 * 1 / 2 + 1) for k in range(4)]  # n=2, S=2, W=2
    assert lrs_of(cbs, epochs=2, steps=2)[0] == pytest.approx([warm[0], warm[1], 10.0, warm[3]])


def test_callbacks_with_different_initial_lrs_each_set_their_own():
    cbs = [LearningRateScheduleCallback(initial_lr=0.4, multiplier=1.0, start_epoch=0, end_epoch=1),
           LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5, start_epoch=1, end_epoch=3, staircase=False)]
    lrs, _ = lrs_of(cbs, epochs=3, steps=2)
    assert lrs == pytest.approx([0.4, 0.4, 0.1, 0.1 * 0.5 ** 0.5, 0.05, 0.1 * 0.5 ** 1.5])


def test_warmup_momentum_correction_scales_the_velocity_by_each_lr_change():
    lrs, ops = lrs_of([LearningRateWarmupCallback(initial_lr=1.0, warmup_epochs=1)], lr=1.0, epochs=2, steps=4,
                      lr_in_momentum=True)
    assert lrs == pytest.approx([0.625, 0.75, 0.875, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert ops.momentum_history == pytest.approx([0.625, 0.75 / 0.625, 0.875 / 0.75, 1.0 / 0.875])
    _, ops = lrs_of([LearningRateWarmupCallback(initial_lr=1.0, warmup_epochs=1, momentum_correction=False)],
                    lr=1.0, epochs=1, steps=4, lr_in_momentum=True)
    assert ops.momentum_history == []


def test_mixed_with_hvdkit_schedule_the_factors_multiply():
    """hvdkit's own schedules keep their multiplicative semantics on top of the Horovod-set LR."""
    cbs = [LearningRateScheduleCallback(initial_lr=1.0, multiplier=0.5, start_epoch=0, end_epoch=2),
           LearningRateSchedule.step_decay([1], gamma=0.1)]
    assert lrs_of(cbs, epochs=3, steps=1)[0] == pytest.approx([1.0, 0.05, 0.05])


def test_fractional_schedule_without_steps_per_epoch_says_so():
    eng = Engine(LocalComm(), DictOps(), [LearningRateWarmupCallback(initial_lr=0.1, warmup_epochs=1)])
    with pytest.raises(ValueError, match="specify the steps_per_epoch parameter to the LearningRateWarmupCallback"):
        eng.train_begin(1, steps_per_epoch=None)
    with pytest.raises(ValueError, match="Parameter `initial_lr` is required"):
        LearningRateScheduleCallback(initial_lr=None, multiplier=0.5)
