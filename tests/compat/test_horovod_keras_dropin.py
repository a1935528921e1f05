"""A Horovod-style Keras 3 script (``import horovod.tensorflow.keras as hvd`` become ``import hvdkit.keras as
hvd``) under horovodrun -np 2, on Keras's TensorFlow and torch backends: Horovod's DistributedOptimizer and
callbacks train an unbuilt Sequential to identical weights on both ranks, the warm-up and schedule LRs are
Horovod's formulas, ``load_model`` restores a distributed optimizer and ``hvd.allreduce`` takes a NumPy value."""

import json

import numpy as np
import pytest
from helpers import horovodrun, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(300),
              pytest.mark.shares("keras_torch_workers")]


@pytest.fixture(scope="module", params=["tensorflow", "torch"])
def ranks(tmp_path_factory, request):
    """The script's results per rank and the job's stdout, on Keras's ``request.param`` backend (on torch, in
    the shared launch of tests/conftest.py)."""
    if request.param == "torch":
        proc = request.getfixturevalue("keras_torch_workers")("dropin")
        out = request.getfixturevalue("keras_torch_workers").folder / "dropin"
    else:
        out = tmp_path_factory.mktemp(f"keras_dropin_{request.param}")
        proc = horovodrun("horovod_keras_dropin.py", str(out), timeout=280, env={"KERAS_BACKEND": request.param})
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["backend"] for r in results] == [request.param] * 2
    return results, proc.stdout


def test_weights_identical_across_ranks_after_fit_and_after_load_model(ranks):
    (a, b), _ = ranks
    # different seeds per rank: equal weights need the (deferred) broadcast of rank 0's variables
    for key in ("weights", "loaded_weights"):
        assert len(a[key]) == 4, key  # two Dense layers: kernel and bias each
        for wa, wb in zip(a[key], b[key], strict=True):
            np.testing.assert_array_equal(np.array(wa), np.array(wb))


def test_metric_average_gives_every_rank_the_same_history(ranks):
    (a, b), _ = ranks
    assert a["history"]["loss"] == b["history"]["loss"]
    assert a["history"]["loss"][-1] < a["history"]["loss"][0]


def test_warmup_and_schedule_follow_horovods_formulas(ranks):
    (a, b), stdout = ranks
    n, initial_lr, steps, warmup_epochs = 2, 0.02, 4, 2
    # Horovod: epoch e, batch i of the warm-up: initial_lr / n * ((e + (i + 1) / S) * (n - 1) / W + 1)
    warmup = [initial_lr / n * ((k + 1) / steps * (n - 1) / warmup_epochs + 1) for k in range(warmup_epochs * steps)]
    # then LearningRateScheduleCallback(multiplier=0.5, start_epoch=2, end_epoch=4): 0.5 ** (epoch - 2),
    # and after end_epoch the LR keeps its last value
    expected = warmup + [initial_lr] * steps + [initial_lr * 0.5] * steps + [initial_lr * 0.5] * steps
    assert a["lrs"] == pytest.approx(expected, rel=1e-6)
    assert b["lrs"] == a["lrs"]
    assert a["history"]["lr"] == pytest.approx([0.015, 0.02, 0.02, 0.01, 0.01], rel=1e-6)  # last batch of each epoch
    assert stdout.count("Epoch 2: finished gradual learning rate warmup to 0.02.") == 1  # verbose, rank 0 only


def test_load_model_wraps_the_optimizer_and_keeps_its_state(ranks):
    (a, _), _ = ranks
    assert a["loaded_is_distributed"]
    assert a["loaded_iterations"] == a["iterations"] == 20
    assert a["loaded_lr"] == pytest.approx(0.01)
    assert a["mean_rank"] == 0.5  # hvd.allreduce of each rank's NumPy value: Horovod's Average
