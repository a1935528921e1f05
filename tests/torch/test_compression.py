"""Gradient compression and reduce ops with real Horovod processes: fp16 compression and
Adasum train through ``hk.distribute`` with identical weights on both ranks; bad names are refused."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_fp16_compression_and_adasum_train_with_identical_ranks(torch_job):
    rows = sorted(tagged_json(torch_job("compression").stdout, "COMPRESSION"),
                  key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1]
    r0, r1 = rows[0]["runs"], rows[1]["runs"]
    for name, a in r0.items():
        b = r1[name]
        print(f"{name}: loss {a['loss_first']:.4f} -> {a['loss_last']:.4f}, weights {a['sha256'][:12]} / "
              f"{b['sha256'][:12]}")
        assert a["sha256"] == b["sha256"] and a["finite"], name  # ranks stay identical
        assert a["loss_last"] < 0.9 * a["loss_first"], (name, a)  # and it trains
    # The choices reach Horovod: fp16 rounding and Adasum's combination change the weights ...
    assert len({r["sha256"] for r in r0.values()}) == len(r0)
    # ... while fp16 stays close to uncompressed averaging (sum with half the LR is the same step).
    for name in ("fp16/average", "fp16/sum"):
        assert abs(r0[name]["loss_last"] - r0["none/average"]["loss_last"]) < 1e-3
    # hvdkit's fp16 casts into buffers it keeps: the same weights as Horovod's fp16 compressor, bit for bit,
    # with one half buffer per parameter for all 30 steps (Horovod allocates new ones every step)
    for row, r in zip(rows, (r0, r1)):
        assert row["horovod_fp16"]["sha256"] == r["fp16/average"]["sha256"]
        assert r["fp16/average"]["half_buffers"] == 4 and row["horovod_fp16"]["half_buffers"] == 0
    for r in rows:  # refused before anything is broadcast, naming argument, value and choices
        assert r["bad_compression"] == "compression must be one of 'none', 'fp16', got 'int8'"
        assert r["bad_op"] == "op must be one of 'average', 'sum', 'adasum', got 'max'"


@pytest.mark.timeout(480)
def test_the_trainer_trains_with_adasum_and_refuses_what_needs_averaged_gradients(torch_job):
    rows = sorted(tagged_json(torch_job("compression").stdout, "COMPRESSION"), key=lambda r: r["rank"])
    a, b = rows[0]["trainer_adasum"], rows[1]["trainer_adasum"]
    assert a["sha256"] == b["sha256"] and a["loss_last"] < 0.9 * a["loss_first"], (a, b)
    assert set(a["refused"]) == {"precision", "clip_grad_norm", "nonfinite"}
    assert a["refused"]["precision"].startswith("precision='fp16' needs gradients averaged before the update, but "
                                                "the optimizer was distributed with op='adasum'")
