"""``hvd.elastic.KerasState`` (hvdkit's, Horovod's is broken on Keras 3) commits, restores and syncs the model's
and optimizer's variables and its plain values as Horovod documents (one process, Horovod of size 1)."""

import os

import numpy as np
import pytest
from helpers import horovodrun, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.timeout(300)]


def test_keras_state_commit_restore_sync():
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    import hvdkit.tensorflow.keras as hvd

    hvd.init(threads=1)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)), loss="mse")
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 2), "float32")
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    state = hvd.elastic.KerasState(model, epoch=3, batch=0)
    assert state.model is model and state.optimizer is model.optimizer
    committed = [w.copy() for w in model.get_weights()]
    momentum = [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]
    state.commit()

    model.fit(x, y, epochs=1, batch_size=4, verbose=0)  # weights and optimizer slots move on
    state.epoch, state.batch = 5, 7
    assert not np.allclose(model.get_weights()[0], committed[0])
    state.restore()  # what Horovod calls after a failed collective
    for w, c in zip(model.get_weights(), committed):
        np.testing.assert_array_equal(w, c)
    for v, m in zip(model.optimizer.variables, momentum):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(v), m)
    assert (state.epoch, state.batch) == (3, 0)

    state.sync()  # after a reset: rank 0's values (here: its own) on every worker
    assert (state.epoch, state.batch) == (3, 0)
    assert hvd.elastic.TensorFlowKerasState is hvd.elastic.KerasState



@pytest.mark.horovod
def test_elastic_run_resets_on_a_failed_collective_and_raises_other_errors():
    """``hvd.elastic.run`` with real Horovod over Gloo (tests/workers/elastic_run_errors.py): a collective that
    fails in its kernel rolls the state back, re-initialises Horovod and runs again on both ranks; an
    ``UnknownError`` from another op reaches the caller instead of becoming a ``None`` result."""
    rows = sorted(tagged_json(horovodrun("elastic_run_errors.py", extra=("--gloo",), timeout=200).stdout,
                              "ELASTIC_RUN"), key=lambda r: r["rank"])
    assert [(r["rank"], r["size"]) for r in rows] == [(0, 2), (1, 2)]
    for r in rows:
        assert r["calls"] == [0, 0] and r["counter"] == 1, r  # rolled back to the commit, then run again
        assert r["result"] == [3.0, 3.0], r  # 1 + 2: the collective works after the reset
        assert r["returned"] is None and r["raised"] == "UnknownError: True", r
