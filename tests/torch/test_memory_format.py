"""channels_last and channels_last_3d through hvdkit with real Horovod processes (tests/workers/memory_format.py):
the parameter and optimizer-state broadcast, gradient averaging (fp16 compression too), hk.SyncBatchNorm,
the Trainer, a checkpoint resumed, and the elastic state's sync."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(600)]  # may start the shared job


@pytest.fixture(scope="module")
def rows(torch_job):
    rows = sorted(tagged_json(torch_job("memory_format").stdout, "MEMFMT"), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1]
    return rows


def max_diff(a: dict, b: dict) -> float:
    return max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))


def test_channels_last_trains_with_identical_ranks_and_the_weights_of_its_nchw_twin(rows):
    r0, r1 = rows[0]["runs"], rows[1]["runs"]
    for name, run in r0.items():
        assert run["sha256"] == r1[name]["sha256"], name  # ranks identical, bit for bit
        assert run["format_kept"], name  # parameters are still channels_last after training
    for twin, channels_last in (("2d/nchw/distribute", "2d/cl/distribute"),
                                ("3d/nchw/distribute", "3d/cl3d/distribute"),
                                ("2d/nchw/distribute-fp16", "2d/cl/distribute-fp16"),
                                ("2d/nchw/trainer", "2d/cl/trainer")):
        diff = max_diff(r0[twin]["weights"], r0[channels_last]["weights"])
        print(f"{channels_last}: max |w - w_nchw| = {diff:.2e}")
        assert diff < 1e-4, (channels_last, diff)


def test_channels_last_checkpoint_resumes_to_the_uninterrupted_weights(rows):
    for row in rows:
        resumed, uninterrupted = row["resume"]["resumed"], row["resume"]["uninterrupted"]
        assert resumed["sha256"] == uninterrupted["sha256"]
        assert resumed["format_kept"] and resumed["state_format_kept"]
    assert rows[0]["resume"]["resumed"]["sha256"] == rows[1]["resume"]["resumed"]["sha256"]


def test_elastic_state_sync_of_channels_last_weights(rows):
    assert rows[0]["elastic"]["sha256"] == rows[1]["elastic"]["sha256"]
    assert rows[0]["elastic"]["state_sha256"] == rows[1]["elastic"]["state_sha256"]
    assert rows[1]["elastic"]["format_kept"]
