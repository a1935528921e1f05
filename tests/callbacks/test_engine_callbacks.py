"""The engine and shared callbacks with a one-process Comm and a pure-Python FrameworkOps."""

import json

import pytest
from fakes import DictOps, run_epochs

from hvdkit.callbacks import Checkpoint, LearningRateSchedule, LearningRateWarmup, MetricAverage, MetricsLogger
from hvdkit.core import Callback, Engine, Event, LocalComm
from hvdkit.core import lr as lrmath


class Recorder(Callback):
    def __init__(self, tag, log, order=0):
        self.tag, self.log, self.order = tag, log, order

    def on_train_begin(self, state):
        self.log.append((self.tag, "train_begin"))

    def on_batch_end(self, state):
        self.log.append((self.tag, "lr", state.global_step - 1, state.ops.get_lr()))


def test_dispatcher_runs_callbacks_by_order_then_given_order():
    log = []
    Engine(LocalComm(), DictOps(), [Recorder("b", log), Recorder("a", log, order=-5), Recorder("c", log)]).fire(
        Event.TRAIN_BEGIN)
    assert [t for t, _ in log] == ["a", "b", "c"]


def test_non_callback_is_rejected_with_its_index():
    with pytest.raises(TypeError, match=r"callbacks\[1\] must be an hvdkit.core.Callback, got str"):
        Engine(LocalComm(), DictOps(), [Recorder("a", []), "oops"])


def test_warmup_sets_lr_every_batch_for_n4():
    log = []
    eng = Engine(LocalComm(size=4), DictOps(lr=0.4), [LearningRateWarmup(warmup_epochs=2), Recorder("r", log)])
    run_epochs(eng, epochs=3, steps=5)
    lrs = [(k, v) for (_, kind, k, v) in [e for e in log if e[1] == "lr"]]
    assert len(lrs) == 15
    for k, v in lrs:
        assert v == pytest.approx(lrmath.warmup_lr(0.4, k, 10, 4), rel=1e-15)


def test_warmup_and_step_decay_compose():
    log = []
    cbs = [LearningRateWarmup(warmup_epochs=1), LearningRateSchedule.step_decay([2], gamma=0.5), Recorder("r", log)]
    eng = Engine(LocalComm(size=2), DictOps(lr=1.0), cbs)
    run_epochs(eng, epochs=3, steps=4)
    lrs = [e[3] for e in log if e[1] == "lr"]
    assert lrs[:4] == pytest.approx([0.5, 0.625, 0.75, 0.875])
    assert lrs[4:8] == pytest.approx([1.0] * 4)
    assert lrs[8:] == pytest.approx([0.5] * 4)


def test_cosine_schedule_uses_fractional_epoch():
    log = []
    eng = Engine(LocalComm(), DictOps(lr=1.0), [LearningRateSchedule.cosine(end_epoch=2), Recorder("r", log)])
    run_epochs(eng, epochs=2, steps=2)
    lrs = [e[3] for e in log if e[1] == "lr"]
    assert lrs == pytest.approx([lrmath.cosine_factor(x, 0, 2) for x in (0, 0.5, 1.0, 1.5)])


def test_momentum_correction_only_where_lr_sits_in_the_velocity():
    keras_like = DictOps(lr=1.0, momentum=0.9, lr_in_momentum=True)
    run_epochs(Engine(LocalComm(size=2), keras_like, [LearningRateWarmup(warmup_epochs=1)]), epochs=1, steps=2)
    # velocity scaled by new/old LR: step 0: lr 1.0 -> 0.5, step 1: 0.5 -> 0.75, then constant
    assert keras_like.momentum_history == pytest.approx([0.5, 1.5])
    torch_like = DictOps(lr=1.0, momentum=0.9, lr_in_momentum=False)
    run_epochs(Engine(LocalComm(size=2), torch_like, [LearningRateWarmup(warmup_epochs=1)]), epochs=1, steps=2)
    assert torch_like.momentum_history == []


class TwoRanks(LocalComm):
    """Rank 0 of 2; at an epoch end the peer (rank 1) logged ``peer(own metrics)``, elsewhere what rank 0 did."""

    def __init__(self, peer):
        super().__init__(size=2)
        self.peer = peer

    def allgather_object(self, obj):
        is_metrics = isinstance(obj, dict) and "loss" in obj
        return [obj, self.peer(obj) if is_metrics else obj]


def test_metric_average_puts_the_mean_over_ranks_in_the_history():
    # rank 0 logs loss 0.0 and 1.0 (run_epochs), the peer 2.0 higher: the history must hold the means,
    # which differ from both ranks' own values
    eng = Engine(TwoRanks(lambda m: {k: v + 2.0 for k, v in m.items()}), DictOps(), [MetricAverage()])
    run_epochs(eng, epochs=2, steps=1)
    assert eng.state.history["loss"] == [1.0, 2.0]


def test_metric_average_names_each_ranks_metrics_when_they_differ():
    eng = Engine(TwoRanks(lambda m: {**m, "val_loss": 0.5}), DictOps(), [MetricAverage()])
    with pytest.raises(ValueError, match=r"ranks logged different metrics at the end of epoch 1 "
                                         r"\(rank 0: loss; rank 1: loss, val_loss\)"):
        run_epochs(eng, epochs=1, steps=1)


def test_metrics_logger_appends_and_never_truncates(tmp_path):
    path = tmp_path / "m.csv"
    run_epochs(Engine(LocalComm(), DictOps(), [MetricsLogger(path)]), epochs=2, steps=1)
    run_epochs(Engine(LocalComm(), DictOps(), [MetricsLogger(path)]), epochs=1, steps=1)
    lines = path.read_text().splitlines()
    assert lines[0] == "epoch,global_step,loss" and len(lines) == 4
    jl = tmp_path / "m.jsonl"
    run_epochs(Engine(LocalComm(), DictOps(), [MetricsLogger(jl)]), epochs=2, steps=3)
    rows = [json.loads(x) for x in jl.read_text().splitlines()]
    assert rows == [{"epoch": 1, "global_step": 3, "loss": 0.0}, {"epoch": 2, "global_step": 6, "loss": 1.0}]


def test_checkpoint_resume_restores_counters_callbacks_and_rescales_lr(tmp_path, caplog):
    ops = DictOps(lr=0.4)
    eng = Engine(LocalComm(size=4), ops, [Checkpoint(tmp_path), LearningRateWarmup(warmup_epochs=1)])
    run_epochs(eng, epochs=2, steps=3, on_step=lambda e: e.state.ops.weights.__setitem__("w", e.state.global_step))
    # resume under world size 2: target LR follows the linear scaling rule
    ops2 = DictOps(lr=999.0)
    log = []
    eng2 = Engine(LocalComm(size=2), ops2, [Checkpoint(tmp_path), LearningRateWarmup(warmup_epochs=1),
                                            Recorder("r", log)])
    with caplog.at_level("WARNING", logger="hvdkit"):
        run_epochs(eng2, epochs=3, steps=3)
    assert "world size changed from 4 to 2" in caplog.text
    assert ops2.weights == {"w": 5}
    assert eng2.state.target_lr == pytest.approx(0.2)
    lrs = [e for e in log if e[1] == "lr"]
    assert [k for _, _, k, _ in lrs] == [6, 7, 8]
    assert all(v == pytest.approx(0.2) for *_, v in lrs)
    assert eng2.state.history["loss"] == [0.0, 1.0, 2.0]


def test_a_resume_keeps_an_lr_another_callback_lowered_after_the_warm_up(tmp_path):
    # Horovod's keras_mnist_advanced: warm-up, then ReduceLROnPlateau sets the optimizer's LR itself. After
    # the warm-up the engine leaves it alone; a resume must too, not put the warm-up's target back.
    class Plateau(Callback):  # halves the optimizer's LR at each epoch end, outside the engine
        def on_epoch_end(self, state):
            state.ops.set_lr(state.ops.get_lr() / 2)

    def lrs_by_epoch(ops, log):
        return lambda e: log.setdefault(e.state.epoch, ops.get_lr())

    whole, seen = DictOps(lr=0.4), {}
    run_epochs(Engine(LocalComm(size=2), whole, [LearningRateWarmup(warmup_epochs=1), Plateau()]), epochs=4, steps=2,
               on_step=lrs_by_epoch(whole, seen))
    def callbacks():
        return [Plateau(), Checkpoint(tmp_path), LearningRateWarmup(warmup_epochs=1)]

    run_epochs(Engine(LocalComm(size=2), DictOps(lr=0.4), callbacks()), epochs=2, steps=2)
    resumed, seen_resumed = DictOps(lr=0.4), {}
    run_epochs(Engine(LocalComm(size=2), resumed, callbacks()), epochs=4, steps=2,
               on_step=lrs_by_epoch(resumed, seen_resumed))
    # the warm-up's factor goes from 1/2 to 1 in epoch 0, overriding the halving then; from epoch 2 on the
    # engine's LR stays 0.4, and the halvings hold
    assert seen == {0: 0.2, 1: 0.4, 2: 0.2, 3: 0.1}
    assert seen_resumed == {2: 0.2, 3: 0.1}


def test_threads_per_rank_resolution():
    from hvdkit.runtime.tuning import resolve_threads

    assert resolve_threads(3, 2, {}) == 3
    assert resolve_threads(None, 2, {"HVDKIT_THREADS": "5", "OMP_NUM_THREADS": "1"}) == 5
    assert resolve_threads(None, 2, {"OMP_NUM_THREADS": "4"}) is None  # the user's setting stays
    assert resolve_threads(None, 1, {}) >= 1
    with pytest.raises(ValueError, match="threads must be an integer >= 1 or None, got 0"):
        resolve_threads(0, 1, {})


def test_progress_bar_on_rank_0_only(tmp_path):
    import io

    from hvdkit.callbacks import ProgressBar

    out = io.StringIO()
    run_epochs(Engine(LocalComm(), DictOps(), [ProgressBar(file=out, ascii=True)]), epochs=2, steps=3)
    text = out.getvalue()
    assert "epoch 1/2" in text and "epoch 2/2" in text and "3/3" in text and "loss=" in text

    class Rank1(LocalComm):
        rank = property(lambda self: 1)

    quiet = io.StringIO()
    run_epochs(Engine(Rank1(2), DictOps(), [ProgressBar(file=quiet)]), epochs=1, steps=2)
    assert quiet.getvalue() == ""
