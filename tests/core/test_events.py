"""Events and callbacks as Composer has them: documented events, a final run_event, close() after every run,
per-event dispatch lists, and validation visible to callbacks (EVAL_BEGIN/EVAL_END)."""

import pytest
from fakes import DictOps

from hvdkit.core import Callback, Dispatcher, Engine, Event, LocalComm


class Recorder(Callback):
    def __init__(self):
        self.seen = []
        self.closed = 0

    def on_train_begin(self, state):
        self.seen.append("train_begin")

    def on_eval_begin(self, state):
        self.seen.append(("eval_begin", dict(state.logs)))

    def on_eval_end(self, state):
        self.seen.append(("eval_end", dict(state.logs)))

    def on_epoch_end(self, state):
        self.seen.append(("epoch_end", dict(state.logs)))

    def on_train_end(self, state):
        self.seen.append("train_end")

    def close(self):
        self.closed += 1


class OnlyBatchEnd(Callback):
    def on_batch_end(self, state):
        pass


def engine(*callbacks):
    return Engine(LocalComm(), DictOps(), callbacks)


def test_every_event_says_when_it_fires_and_what_state_is_valid():
    docs = {event: event.__doc__ for event in Event}
    for event, doc in docs.items():
        assert doc and doc != Event.__doc__, event
    assert len(set(docs.values())) == len(docs)  # one docstring each, not the class's
    assert "val_" in Event.EVAL_END.__doc__
    for event in Event:
        assert callable(getattr(Callback, event.method_name)), event  # every event has its hook


def test_overriding_run_event_is_refused_when_the_class_is_created():
    with pytest.raises(TypeError, match=r"Sneaky overrides Callback.run_event, which is final: override the on_\* "
                                        r"hook"):
        class Sneaky(Callback):
            def run_event(self, event, state):
                pass

    class Subclass(OnlyBatchEnd):  # a deeper subclass that leaves run_event alone is fine
        pass

    assert Subclass.overrides(Event.BATCH_END) and not Subclass.overrides(Event.BATCH_BEGIN)


@pytest.mark.parametrize("name, meant", [("on_train_batch_end", "on_batch_end"),  # Keras's name
                                         ("on_validation_end", "on_eval_end"),  # Lightning's
                                         ("on_epoch_ned", "on_epoch_end"),  # a typo
                                         ("on_anything", None)])
def test_an_on_method_no_event_calls_is_refused_when_the_class_is_created(name, meant):
    # It would never run, and nothing else would say so.
    with pytest.raises(TypeError) as err:
        type("Mine", (Callback,), {name: lambda self, state: None})
    assert f"Mine.{name} is not an hvdkit event, so it would never be called" in str(err.value)
    assert (f"override {meant} instead" if meant else "rename it if it is a helper") in str(err.value)
    assert "on_batch_end, on_eval_begin" in str(err.value)  # the events, listed
    type("Fine", (Callback,), {"on_batch_end": lambda self, state: None, "helper": lambda self: None,
                               "on_": 3})  # a value that is not a method is not a hook


def test_an_event_reaches_only_the_callbacks_that_override_its_hook():
    rec, quiet, batch = Recorder(), Callback(), OnlyBatchEnd()
    disp = Dispatcher([rec, quiet, batch])
    assert disp.listeners(Event.BATCH_END) == [batch]
    assert disp.listeners(Event.BATCH_BEGIN) == []
    assert disp.listeners(Event.EVAL_END) == [rec]
    late = OnlyBatchEnd()
    assert disp.add(late) and not disp.add(late)  # once, by identity; the lists are rebuilt
    assert disp.listeners(Event.BATCH_END) == [batch, late]
    disp.clear()
    assert disp.listeners(Event.EVAL_END) == [] and disp.callbacks == []


def test_validation_fires_eval_events_with_the_val_logs_before_epoch_end():
    rec = Recorder()
    eng = engine(rec)
    eng.train_begin(1, steps_per_epoch=1)
    eng.epoch_begin(0)
    eng.batch_begin(0)
    eng.batch_end({"loss": 2.0})
    eng.eval_begin({"loss": 2.0})
    logs = eng.eval_end({"val_loss": 3.0})
    eng.epoch_end(logs)
    eng.train_end()
    assert rec.seen == ["train_begin", ("eval_begin", {"loss": 2.0}),
                        ("eval_end", {"loss": 2.0, "val_loss": 3.0}),
                        ("epoch_end", {"loss": 2.0, "val_loss": 3.0}), "train_end"]
    assert eng.state.history == {"loss": [2.0], "val_loss": [3.0]}


class FailsAtTrainEnd(Callback):
    def on_train_end(self, state):
        raise RuntimeError("on_train_end failed")


class FailsToClose(Callback):
    def close(self):
        raise OSError("close failed")


def test_close_runs_after_every_run_even_when_training_or_a_callback_raised():
    rec = Recorder()
    eng = engine(rec, FailsAtTrainEnd())
    eng.train_begin(1, steps_per_epoch=1)
    with pytest.raises(RuntimeError, match="on_train_end failed"):
        try:
            raise ValueError("a step failed")
        finally:
            eng.train_end()
    assert rec.closed == 1
    rec2 = Recorder()
    eng2 = engine(FailsToClose(), rec2)
    eng2.train_begin(1, steps_per_epoch=1)
    with pytest.raises(OSError, match="close failed"):
        eng2.train_end()
    assert rec2.closed == 1  # the others still release theirs


def test_tensorboard_releases_its_writer_in_close_after_a_failed_run(tmp_path):
    pytest.importorskip("tensorboardX")
    from hvdkit.callbacks import TensorBoard

    tb = TensorBoard(tmp_path / "tb", batch_every=1)
    eng = engine(tb)
    eng.train_begin(1, steps_per_epoch=2)
    assert tb._writer is not None
    try:
        eng.epoch_begin(0)
        eng.batch_begin(0)
        eng.batch_end({"loss": 1.0})
        with pytest.raises(RuntimeError):
            raise RuntimeError("a step failed")
    finally:
        eng.train_end()
    assert tb._writer is None
    assert list((tmp_path / "tb").iterdir())  # the event file was written and closed
