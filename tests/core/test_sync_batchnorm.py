"""SyncBatchNorm with real Horovod processes: 2 workers with batch b each give the statistics,
outputs and gradients of one process with batch 2b (torch and Keras 3); converted models train in step."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]
TOL = 5e-6  # float32 sums of 400 values; measured errors are below 1e-6


def _rows(job, tag: str) -> list[dict]:
    """The sync_batchnorm script's rows in a shared launch (tests/conftest.py, tests/core/conftest.py)."""
    proc = job("sync_batchnorm")
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
def test_keras_sync_batchnormalization_equals_one_process_with_the_whole_batch(keras_workers):
    rows = _rows(keras_workers, "KERAS_SYNCBN")
    worst = max(v for r in rows for mode in r["errors"].values() for v in mode.values())
    print(f"Keras SyncBatchNormalization: max abs error {worst:.2e} (eager and tf.function); "
          f"unsynchronised batch norm is off by {min(r['local_gap'] for r in rows):.3f}")
    assert worst < TOL
    assert all(r["local_gap"] > 100 * TOL for r in rows)
    assert rows[0]["sha256"] == rows[1]["sha256"] and rows[0]["restored_layer"] == "SyncBatchNormalization"
    for r in rows:
        assert r["loss"][-1] < r["loss"][0]
