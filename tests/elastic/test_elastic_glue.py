"""The framework-free elastic loop: commits carry counters, callback states, LR and the data position;
applying a commit is idempotent and follows the linear scaling rule; a failure rolls back and the
rest of the epoch is dealt out over the new world. The fake ``State`` and retry loop below do what
Horovod's ``ObjectState`` and ``run_fn`` do (restore, reset callbacks, sync), minus the network; the
real ones run in tests/elastic/test_elastic.py."""

import subprocess

import pytest
from fakes import DictOps

from hvdkit.callbacks import LearningRateWarmup
from hvdkit.core import Callback, Engine, Event, LocalComm
from hvdkit.core.elastic.loop import ElasticLoop
from hvdkit.core.elastic.state import LoopCommit
from hvdkit.tools.elastic_local import command, write_discovery


class World(LocalComm):
    """A one-process Comm whose reported size a test can change (as Horovod's does on reset)."""

    def __init__(self, size):
        super().__init__(size, elastic=True)

    def resize(self, n):
        self._size = n


class Resets(Callback):
    def __init__(self):
        self.seen = []

    def on_reset(self, state):
        self.seen.append((state.comm.size, state.global_step))


class PlainState:
    """What Horovod's ObjectState does with its values: save on commit, put back on restore."""

    def __init__(self, **values):
        self._saved = dict(values)
        self.__dict__.update(values)
        self.reset_callbacks = []

    def save(self):
        self._saved = {k: getattr(self, k) for k in self._saved}

    def restore(self):
        self.__dict__.update(self._saved)

    def sync(self):
        self.restore()  # one process: rank 0's committed values are its own

    def commit(self):
        self.save()

    def register_reset_callbacks(self, callbacks):
        self.reset_callbacks.extend(callbacks)


class FakeState(LoopCommit, PlainState):
    def __init__(self, loop):
        self._loop = loop
        super().__init__(hvdkit=loop.snapshot())


class Failure(Exception):
    pass


class FakeAdapter:
    """Trains index lists step by step; fails once at ``fail_at`` (global step), after which the world
    has ``new_size`` workers."""

    batch_end_in_step = True

    def __init__(self, comm, fail_at=None, new_size=1):
        self.comm, self.fail_at, self.new_size = comm, fail_at, new_size
        self.trained = {}  # epoch -> sample indices trained by this worker

    def make_state(self, loop):
        return FakeState(loop)

    def run(self, func):
        def wrapper(state):
            while True:
                try:
                    state.sync()
                    return func(state)
                except Failure:
                    state.restore()
                    self.comm.resize(self.new_size)
                    for cb in state.reset_callbacks:
                        cb()

        return wrapper

    def train_steps(self, loop, indices):
        s = loop.engine.state
        for i in range(0, -(-len(indices) // loop.batch_size)):
            loop.step_begin(i)
            if s.global_step == self.fail_at:
                self.fail_at = None
                raise Failure()
            batch = indices[i * loop.batch_size:(i + 1) * loop.batch_size]
            self.trained.setdefault(s.epoch, []).extend(batch)
            loop.step_end(i, {"loss": 1.0})
        return {"loss": 1.0}


def test_a_failure_rolls_back_to_the_last_commit_and_deals_out_the_rest_of_the_epoch():
    comm = World(2)
    ops = DictOps(lr=0.2)
    rec = Resets()
    eng = Engine(comm, ops, [rec])
    # 24 samples, batch 2, 2 workers: 6 steps per epoch. This "worker" is rank 0; the other rank's
    # share of the layout counts as trained by the commit (as on a real second worker).
    loop = ElasticLoop(eng, 24, epochs=2, batch_size=2, commit_every=4, seed=1)
    adapter = FakeAdapter(comm, fail_at=5)
    hist = loop.run(adapter)
    assert loop.resets == 1 and rec.seen == [(1, 4)]  # rolled back to the commit at step 4
    assert len(loop.recovery_seconds) == 1 and loop.recovery_seconds[0] >= 0
    assert hist.epoch == [0, 1] and hist.elastic is loop
    # epoch 0: 4 steps at size 2 (8 of the 16 samples committed came from this rank), then the 8
    # samples not trained yet, alone at batch 2: 4 steps; epoch 1: 12 steps alone.
    assert eng.state.global_step == 4 + 4 + 12
    committed = set(adapter.trained[0][:8])
    assert len(adapter.trained[0]) == 8 + 2 + 8  # 2 samples of step 4 were trained, then rolled back
    rest = adapter.trained[0][10:]
    assert committed.isdisjoint(rest) and len(set(rest)) == 8
    assert sorted(adapter.trained[1]) == list(range(24))
    # LR: scaled for 2 workers, then for 1 (linear scaling rule), from the commit, not the failed step
    assert eng.state.target_lr == pytest.approx(0.1) and ops.get_lr() == pytest.approx(0.1)


def test_apply_is_idempotent_and_rescales_from_the_commit():
    comm, ops = World(2), DictOps(lr=0.2)
    rec = Resets()
    eng = Engine(comm, ops, [LearningRateWarmup(warmup_epochs=1), rec])
    loop = ElasticLoop(eng, 16, epochs=3, batch_size=2, commit_every=3)
    eng.elastic = loop
    eng.train_begin(epochs=3, steps_per_epoch=4)
    eng.epoch_begin(0)
    for i in range(3):
        eng.batch_begin(i)
        eng.batch_end({})
    snap = loop.snapshot()
    lr_at_commit = ops.get_lr()
    eng.batch_begin(3)  # work after the commit, then a failure
    eng.batch_end({})
    comm.resize(1)
    loop.on_reset()
    loop.apply(snap)  # the sync after the reset applies the same commit again
    s = eng.state
    assert (s.global_step, s.batch, s.epoch) == (3, 3, 0)
    assert s.target_lr == pytest.approx(0.1) and s.target_world_size == 1
    assert ops.get_lr() == pytest.approx(lr_at_commit / 2)
    assert rec.seen == [(1, 3)]
    loop.apply(snap)
    assert ops.get_lr() == pytest.approx(lr_at_commit / 2)
    assert Event.RESET.value == "on_reset"


def test_the_world_size_warning_is_written_once_per_change(caplog):
    comm, ops = World(2), DictOps(lr=0.2)
    eng = Engine(comm, ops, [])
    loop = ElasticLoop(eng, 16, epochs=1, batch_size=2)
    eng.elastic = loop
    eng.train_begin(epochs=1, steps_per_epoch=4)
    snap = loop.snapshot()
    comm.resize(1)
    with caplog.at_level("WARNING", logger="hvdkit"):
        for _ in range(3):  # restore, reset, sync each apply the commit
            loop.apply(snap)
    assert caplog.text.count("world size changed from 2 to 1") == 1


def test_elastic_loop_arguments_are_validated():
    with pytest.raises(ValueError, match="commit_every must be an integer >= 1, got 0"):
        ElasticLoop(Engine(World(1), DictOps(), []), 10, epochs=1, batch_size=1, commit_every=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        ElasticLoop(Engine(World(1), DictOps(), []), 10, epochs=1, batch_size=0)
    with pytest.raises(ValueError, match="num_samples must be an integer >= 1, got 0"):
        ElasticLoop(Engine(World(1), DictOps(), []), 0, epochs=1, batch_size=1)


def test_fit_elastic_outside_the_elastic_driver_and_fit_under_it_are_clear_errors():
    with pytest.raises(RuntimeError, match="fit_elastic needs Horovod's elastic driver"):
        ElasticLoop(Engine(LocalComm(2), DictOps(), []), 10, epochs=1, batch_size=1)
    with pytest.raises(RuntimeError, match="train with fit_elastic"):
        Engine(World(2), DictOps(), []).train_begin(epochs=1, steps_per_epoch=1)


def test_local_discovery_and_command(tmp_path):
    hosts, script = write_discovery(tmp_path, slots_per_host=2)
    out = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=10).stdout
    assert out == "localhost:2\n127.0.0.1:2\n" and hosts.read_text() == out
    cmd = command(4, 2, script, ["python", "t.py"])
    assert cmd[:11] == ["horovodrun", "-np", "4", "--min-np", "2", "--max-np", "4", "--network-interface", "lo",
                        "--host-discovery-script", str(script)]
    with pytest.raises(ValueError, match="1 <= min_np <= np, got np=2, min_np=3"):
        command(2, 3, script, ["python"])
