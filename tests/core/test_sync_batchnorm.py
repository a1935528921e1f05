"""SyncBatchNorm with real Horovod processes: 2 workers with batch b each give the statistics,
outputs and gradients of one process with batch 2b (torch, and Keras 3 on its TensorFlow and torch backends,
with and without a mask); converted models train in step."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.shares("keras_workers")]
TOL = 5e-6  # float32 sums of 400 values; measured errors are below 1e-6


def _rows(job, tag: str, label: str = "sync_batchnorm") -> list[dict]:
    """A sync_batchnorm script's rows in a shared launch (tests/conftest.py, tests/core/conftest.py)."""
    proc = job(label)
    rows = tagged_json(proc.stdout, tag)
    assert len(rows) == 2, proc.stdout[-3000:]
    return sorted(rows, key=lambda r: r["rank"])


@pytest.mark.timeout(300)
def test_torch_sync_batchnorm_equals_one_process_with_the_whole_batch(torch_workers):
    rows = _rows(torch_workers, "SYNCBN")
    worst = max(v for r in rows for v in r["errors"].values())
    print(f"torch SyncBatchNorm: max abs error {worst:.2e} over {sorted(rows[0]['errors'])}; "
          f"unsynchronised batch norm is off by {min(r['local_gap'] for r in rows):.3f}")
    assert worst < TOL
    assert all(r["local_gap"] > 100 * TOL for r in rows)  # the comparison can tell local from global statistics
    assert rows[0]["converted"] == 2 and rows[0]["sha256"] == rows[1]["sha256"]  # replicas identical after fit
    for r in rows:
        assert r["loss"][-1] < r["loss"][0]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_keras_sync_batchnormalization_equals_one_process_with_the_whole_batch(request, backend):
    # Each backend rides in a shared launch: the Keras one on TensorFlow, the torch one on torch (conftest.py).
    if backend == "tensorflow":
        rows = _rows(request.getfixturevalue("keras_workers"), "KERAS_SYNCBN")
    else:
        rows = _rows(request.getfixturevalue("torch_workers"), "KERAS_SYNCBN", label="keras_sync_batchnorm")
    worst = max(v for r in rows for mode in r["errors"].values() for v in mode.values())
    print(f"Keras SyncBatchNormalization on {backend}: max abs error {worst:.2e} over {sorted(rows[0]['errors'])}; "
          f"unsynchronised batch norm is off by {min(r['local_gap'] for r in rows):.3f}")
    assert all(r["backend"] == backend for r in rows)
    assert sorted(rows[0]["errors"]) == sorted(["eager", "masked"] + (["graph"] if backend == "tensorflow" else []))
    assert worst < TOL
    assert all(r["local_gap"] > 100 * TOL for r in rows)
    assert rows[0]["sha256"] == rows[1]["sha256"] and rows[0]["restored_layer"] == "SyncBatchNormalization"
    for r in rows:
        assert r["loss"][-1] < r["loss"][0]
