"""Keras model.fit under real Horovod: validation inside fit fires the engine's on_eval_begin/on_eval_end
(Keras's on_test_begin/on_test_end) before on_epoch_end, for a user's core callback passed through
EngineBridge; hvdkit's explicit Keras classes and Horovod's hvd.callbacks names train together."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def ranks(keras_workers):
    proc = keras_workers("vocabulary")  # vocabulary_events.py keras, in the shared Keras launch (conftest.py)
    rows = tagged_json(proc.stdout, "VOCAB")
    assert len(rows) == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    return rows


def test_keras_validation_fires_the_eval_events_with_val_logs(ranks):
    for r in ranks:
        assert r["events"] == ["epoch_begin", "eval_begin", "eval_end", "epoch_end"] * 2
        assert len(r["eval_logs"]) == 2 and all("val_loss" in e for e in r["eval_logs"])
        assert "val_loss" in r["history"] and len(r["history"]["val_loss"]) == 2
        assert r["closed"] == 1
        assert r["schedule_class"] == "LearningRateSchedule"  # the classmethod returns the Keras class
        assert r["deprecations"] == []
    # every rank validated the same arrays: the same values before any averaging
    rank0, rank1 = ([e["val_loss"] for e in r["eval_logs"]] for r in ranks)
    assert rank0 == pytest.approx(rank1)
