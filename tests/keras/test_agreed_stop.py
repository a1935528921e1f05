"""Keras fit with hvdkit: a callback that stops training on one rank (TerminateOnNaN after a NaN there, an
early stop on that rank's numbers) stopped that rank only, and the others waited in the next allreduce
forever; an infinite dataset without steps_per_epoch never ended epoch 0. Now all ranks stop together,
and the infinite dataset is refused before the first step."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.mark.timeout(300)
def test_one_ranks_stop_stops_every_rank_and_an_endless_epoch_is_refused(keras_workers):
    proc = keras_workers("stop")  # keras_stop.py, in the shared Keras launch (conftest.py)
    rows = sorted(tagged_json(proc.stdout, "RESULT"), key=lambda row: row["rank"])
    assert [row["rank"] for row in rows] == [0, 1], proc.stdout[-3000:] + proc.stderr[-3000:]
    for row in rows:
        assert row["nan"] == ["epoch 0", 0, 1, 2]  # both stopped after batch 2, where rank 1's loss is NaN
        assert row["class_after"] == "keras.src.models.sequential.Sequential" and row["plain_class"]
        assert row["early"] == ["epoch 0", "epoch 1"]  # rank 0's decision at epoch 1's end
        assert row["infinite"].startswith("model.fit needs steps_per_epoch here: the training data has no known "
                                          "length (a tf.data.Dataset that repeat()s forever")
        assert row["infinite_steps"] == ["epoch 0"] or row["infinite_steps"] == []
