"""ElasticProgress (framework-free): commits carry counters, callback states and LR; applying a
commit is idempotent and follows the linear scaling rule for the world size in force."""

import subprocess

import pytest
from fakes import DictOps

from hvdkit.callbacks import LearningRateWarmup
from hvdkit.core import Callback, Engine, Event, LocalComm
from hvdkit.core.elastic import ElasticProgress
from hvdkit.elastic_local import command, write_discovery


class World(LocalComm):
    """A one-process Comm whose reported size a test can change (as Horovod's does on reset)."""

    def __init__(self, size):
        super().__init__(size)

    def resize(self, n):
        self._size = n


class Resets(Callback):
    def __init__(self):
        self.seen = []

    def on_reset(self, state):
        self.seen.append((state.comm.size, state.global_step))


def test_apply_is_idempotent_and_rescales_from_the_commit():
    comm, ops = World(2), DictOps(lr=0.2)
    rec = Resets()
    eng = Engine(comm, ops, [LearningRateWarmup(warmup_epochs=1), rec])
    eng.train_begin(epochs=3, steps_per_epoch=4)
    eng.epoch_begin(0)
    for i in range(3):
        eng.batch_begin(i)
        eng.batch_end({})
    progress = ElasticProgress(eng, commit_every=3)
    assert progress.should_commit()
    snap = progress.snapshot()
    lr_at_commit = ops.get_lr()
    eng.batch_begin(3)  # work after the commit, then a failure
    eng.batch_end({})
    comm.resize(1)
    progress.on_reset()
    progress.apply(snap)  # the sync after the reset applies the same commit again
    s = eng.state
    assert (s.global_step, s.batch, s.epoch) == (3, 3, 0)
    assert s.target_lr == pytest.approx(0.1) and s.target_world_size == 1
    assert ops.get_lr() == pytest.approx(lr_at_commit / 2)
    assert rec.seen == [(1, 3)]
    progress.apply(snap)
    assert ops.get_lr() == pytest.approx(lr_at_commit / 2)


def test_recovery_time_is_measured_from_reset_to_first_step():
    eng = Engine(World(2), DictOps(), [])
    eng.train_begin(epochs=1, steps_per_epoch=1)
    progress = ElasticProgress(eng)
    progress.snapshot()
    progress.on_reset()
    progress.step_done()
    progress.step_done()
    assert len(progress.recovery_seconds) == 1 and progress.recovery_seconds[0] >= 0
    assert Event.RESET.value == "on_reset"


def test_commit_every_is_validated():
    with pytest.raises(ValueError, match="commit_every must be an integer >= 1, got 0"):
        ElasticProgress(Engine(World(1), DictOps(), []), commit_every=0)


def test_local_discovery_and_command(tmp_path):
    hosts, script = write_discovery(tmp_path, slots_per_host=2)
    out = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=10).stdout
    assert out == "localhost:2\n127.0.0.1:2\n" and hosts.read_text() == out
    cmd = command(4, 2, script, ["python", "t.py"])
    assert cmd[:11] == ["horovodrun", "-np", "4", "--min-np", "2", "--max-np", "4", "--network-interface", "lo",
                        "--host-discovery-script", str(script)]
    with pytest.raises(ValueError, match="1 <= min_np <= np, got np=2, min_np=3"):
        command(2, 3, script, ["python"])
