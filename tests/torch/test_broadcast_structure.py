"""Broadcasting parameters or optimizer state whose names or structure differ across ranks raised nowhere
and hung (Horovod waits for tensors some ranks never send); now every rank raises naming the first
difference, before any broadcast starts."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_different_names_or_optimizers_raise_on_every_rank_and_matching_ones_broadcast(torch_job):
    rows = sorted(tagged_json(torch_job("broadcast_structure").stdout, "RESULT"),
                  key=lambda row: row["rank"])
    assert [row["rank"] for row in rows] == [0, 1]
    for row in rows:
        assert row["names"] == (
            "broadcast_parameters: the ranks hold different structures, so the broadcast would wait forever: at "
            "position 0 rank 0 has 'bias' (shape [2], torch.float32) and rank 1 has '0.bias' (shape [2], "
            "torch.float32) (rank 0 has 2 entries, rank 1 2); build the same model and optimizer on every rank")
        assert row["optimizer"].startswith(
            "broadcast_optimizer_state: the ranks hold different structures, so the broadcast would wait forever: "
            "at position 0 rank 0 has 'optimizer' (SGD) and rank 1 has 'optimizer' (Adam)")
    assert rows[0]["weight"] == rows[1]["weight"]  # the matching broadcast still happened
