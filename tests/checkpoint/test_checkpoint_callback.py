"""The Checkpoint callback's start-up checks and run identity (#13), with the framework-free engine:
errors come before the first step, name the argument, the value and what to do, and nothing written
is lost."""

import os
from pathlib import Path

import pytest
from fakes import DictOps, run_epochs

from hvdkit.callbacks import Checkpoint, MetricsLogger
from hvdkit.core import Callback, CheckpointStore, Engine, LocalComm


class Steps(Callback):
    def __init__(self):
        self.n = 0

    def on_batch_begin(self, state):
        self.n += 1


def test_resume_false_refuses_a_folder_another_run_wrote(tmp_path):
    """#13 item 3: a fresh run in a folder an older, longer run used used to delete each checkpoint it
    wrote right after writing it; now it stops before training, naming the folder and the options."""
    run_epochs(Engine(LocalComm(), DictOps(), [Checkpoint(tmp_path, keep=2)]), epochs=6, steps=2)
    before = sorted(p.name for p in tmp_path.iterdir())
    steps = Steps()
    eng = Engine(LocalComm(), DictOps(), [Checkpoint(tmp_path, resume=False), steps])
    with pytest.raises(ValueError, match=r"resume=False, the folder holds checkpoints of another run.*resume=True"):
        run_epochs(eng, epochs=2, steps=2)
    assert steps.n == 0 and sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_resumed_run_keeps_its_run_identity_and_its_newest_checkpoints(tmp_path):
    first = Checkpoint(tmp_path, keep=2)
    run_epochs(Engine(LocalComm(), DictOps(), [first]), epochs=3, steps=2)
    second = Checkpoint(tmp_path, keep=2)
    run_epochs(Engine(LocalComm(), DictOps(), [second]), epochs=5, steps=2)
    assert second.restored.epoch == 3 and second.run_id == first.run_id
    store = CheckpointStore(tmp_path)
    assert store.run_ids() == {first.run_id} and store.latest().manifest.epoch == 5
    assert len(list(tmp_path.glob("*.json"))) == 2


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_an_unwritable_checkpoint_folder_fails_before_the_first_step(tmp_path, where):
    if where == "under_a_file":
        (tmp_path / "f").write_text("x")
        directory = tmp_path / "f" / "ckpt"
    else:
        directory = Path("/proc/hvdkit-ckpt")
    steps = Steps()
    with pytest.raises(ValueError, match=rf"Checkpoint\(directory='{directory}'\): "):
        run_epochs(Engine(LocalComm(), DictOps(), [Checkpoint(directory), steps]), epochs=1, steps=2)
    assert steps.n == 0


def test_an_unwritable_metrics_file_fails_before_the_first_step(tmp_path):
    (tmp_path / "f").write_text("x")
    steps = Steps()
    with pytest.raises(ValueError, match=r"MetricsLogger\(path='.*/f/m.csv'\): cannot write it"):
        run_epochs(Engine(LocalComm(), DictOps(), [MetricsLogger(tmp_path / "f" / "m.csv"), steps]), epochs=1, steps=2)
    assert steps.n == 0


def test_a_checkpoint_of_another_framework_is_a_clear_error(tmp_path):
    run_epochs(Engine(LocalComm(), DictOps(), [Checkpoint(tmp_path)]), epochs=1, steps=1)
    other = DictOps()
    other.name = "keras"
    with pytest.raises(ValueError, match=r"was written by 'fake', but this run trains with 'keras'"):
        run_epochs(Engine(LocalComm(), other, [Checkpoint(tmp_path)]), epochs=2, steps=1)


def test_start_up_removes_temporary_files_of_a_writer_that_died(tmp_path):
    """#13 item 5: a crashed save's temporary file went away only at the next successful save."""
    tmp_path.mkdir(exist_ok=True)
    leftover = tmp_path / f".ckpt-000001-0000000002.safetensors.{os.getpid()}.x.tmp"
    leftover.write_bytes(b"\0" * 1000)
    eng = Engine(LocalComm(), DictOps(), [Checkpoint(tmp_path)])
    eng.train_begin(epochs=1, steps_per_epoch=1)
    assert not leftover.exists()


def test_core_callbacks_in_keras_fit_say_which_class_to_use():
    with pytest.raises(TypeError, match=r"for Keras model.fit use hvdkit.keras.callbacks.Checkpoint"):
        Checkpoint("/tmp/x").set_model(object())
