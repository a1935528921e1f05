"""The PyTorch Trainer under real Horovod: validation fires on_eval_begin/on_eval_end with the val_* logs
before on_epoch_end, close() runs after the run, and the deprecated spellings still train, each with a
DeprecationWarning naming the new name."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(480)]  # may start the shared job


@pytest.fixture(scope="module")
def ranks(torch_job):
    rows = tagged_json(torch_job("vocabulary").stdout, "VOCAB")
    assert len(rows) == 2, rows
    return rows


def test_validation_is_visible_to_callbacks_in_order_with_the_val_logs(ranks):
    for r in ranks:
        assert r["events"] == ["epoch_begin", "eval_begin", "eval_end", "epoch_end"] * 2
        # what on_eval_end saw is what the history got (exact over ranks already)
        assert [e["val_loss"] for e in r["eval_logs"]] == pytest.approx(r["history"]["val_loss"])
        assert r["history"]["val_loss"][-1] == pytest.approx(r["evaluate"]["loss"])
        assert r["closed"] == 1  # once, after the run
    assert ranks[0]["eval_logs"] == ranks[1]["eval_logs"]


def test_old_names_still_work_with_one_warning_each(ranks):
    for r in ranks:
        assert r["old_history_keys"] == ["loss", "val_loss"]
        assert r["shard_old"] == r["shard_new"] == [1, 3]
        assert r["deprecations"] == ["EvalShardSampler(dataset)",
                                     "distribute(backward_passes_per_step=...)", "fit(val_data=...)",
                                     "hvdkit.torch.EvalShardSampler", "shard(drop_remainder=...)"], r["deprecations"]
    rank0, rank1 = (r["eval_sampler"] for r in sorted(ranks, key=lambda r: r["rank"]))  # rows come in any order
    assert rank0[0] == rank0[1] == list(range(0, 20, 2)) and rank1[0] == rank1[1] == list(range(1, 20, 2))
