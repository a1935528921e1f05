"""Bad arguments fail when the callback is built, naming the argument, the value and what is allowed."""

import pytest

from hvdkit.callbacks import Checkpoint, LearningRateSchedule, LearningRateWarmup, MetricsLogger, StepTiming
from hvdkit.core import CheckpointStore, LocalComm


def _file(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    return f


CASES = [
    (lambda t: LearningRateWarmup(warmup_epochs=-1), "warmup_epochs must be a finite number >= 0, got -1"),
    (lambda t: LearningRateWarmup(warmup_epochs="5"), "warmup_epochs must be a finite number >= 0, got '5'"),
    (lambda t: LearningRateWarmup(warmup_epochs=float("nan")), "warmup_epochs must be a finite number >= 0, got nan"),
    (lambda t: LearningRateWarmup(steps_per_epoch=0), "steps_per_epoch must be an integer >= 1, got 0"),
    (lambda t: LearningRateWarmup(steps_per_epoch=2.5), "steps_per_epoch must be an integer >= 1, got 2.5"),
    (lambda t: LearningRateSchedule.step_decay([30, 10]),
     "milestones must be increasing non-negative integers, got [30, 10]"),
    (lambda t: LearningRateSchedule.step_decay([]), "milestones must be a non-empty sequence of epochs, got []"),
    (lambda t: LearningRateSchedule.step_decay([3], gamma=0), "gamma must be a finite number > 0 and <= 1, got 0"),
    (lambda t: LearningRateSchedule.cosine(end_epoch=2, start_epoch=5),
     "end_epoch must be a finite number > 5.0, got 2"),
    (lambda t: LearningRateSchedule.cosine(end_epoch=10, min_factor=1.5),
     "min_factor must be a finite number >= 0 and <= 1, got 1.5"),
    (lambda t: LearningRateSchedule("not callable"), "multiplier must be callable, got 'not callable'"),
    (lambda t: LearningRateSchedule.from_name("linear"), "name must be one of 'step_decay', 'cosine', got 'linear'"),
    (lambda t: Checkpoint(t, every_n_epochs=0), "every_n_epochs must be an integer >= 1, got 0"),
    (lambda t: Checkpoint(t, keep=0), "keep must be an integer >= 1, got 0"),
    (lambda t: Checkpoint(t, keep=True), "keep must be an integer >= 1, got True"),
    (lambda t: Checkpoint(t, resume="no"), "resume must be True or False, got 'no'"),
    (lambda t: Checkpoint(t, trust_pickle=1), "trust_pickle must be True or False, got 1"),
    (lambda t: Checkpoint(t, async_save="yes"), "async_save must be True or False, got 'yes'"),
    (lambda t: Checkpoint(""), "directory must be a non-empty path, got ''"),
    (lambda t: Checkpoint(_file(t)), "which is an existing file"),
    (lambda t: CheckpointStore(t, keep=-2), "keep must be an integer >= 1, got -2"),
    (lambda t: MetricsLogger(t), "path must be a file path, got"),
    (lambda t: MetricsLogger(t / "m.txt", fmt="xml"), "fmt must be one of 'csv', 'jsonl', got 'xml'"),
    (lambda t: MetricsLogger(t / "m.jsonl", batch_every=-1), "batch_every must be an integer >= 0, got -1"),
    (lambda t: MetricsLogger(t / "m.csv", batch_every=10), "batch_every=10 needs JSON lines"),
    (lambda t: StepTiming(every=0), "every must be an integer >= 1, got 0"),
    (lambda t: StepTiming(batch_size=0), "batch_size must be an integer >= 1, got 0"),
    (lambda t: StepTiming(straggler_factor=1), "straggler_factor must be a finite number > 1.0, got 1"),
    (lambda t: StepTiming(straggler_steps=0), "straggler_steps must be an integer >= 1, got 0"),
    (lambda t: LocalComm(size=0), "size must be >= 1, got 0"),
]


@pytest.mark.parametrize("build,message", CASES, ids=[m[:40] for _, m in CASES])
def test_bad_argument_is_rejected_with_a_clear_message(tmp_path, build, message):
    with pytest.raises(ValueError) as exc:
        build(tmp_path)
    assert message in str(exc.value)


def test_warmup_without_steps_per_epoch_says_what_to_do():
    from fakes import DictOps

    from hvdkit.core import Engine

    eng = Engine(LocalComm(), DictOps(), [LearningRateWarmup(warmup_epochs=1)])
    eng.train_begin(epochs=1, steps_per_epoch=None)
    eng.epoch_begin(0)
    with pytest.raises(ValueError, match="LearningRateWarmup needs steps_per_epoch"):
        eng.batch_begin(0)


def test_numpy_integers_count_as_integers_and_come_back_as_python_ints(tmp_path):
    # Configs and array arithmetic give np.int64; refusing "an integer >= 1, got np.int64(2)" helps nobody.
    import numpy as np

    from hvdkit.core.validation import check_int

    value = check_int("epochs", np.int64(2), minimum=1)
    assert value == 2 and type(value) is int
    assert Checkpoint(tmp_path / "c", keep=np.uint8(2)).store.keep == 2
    for bad in (np.True_, np.float64(2.0), True):
        with pytest.raises(ValueError, match="epochs must be an integer >= 1, got"):
            check_int("epochs", bad, minimum=1)
