"""torch.compile(model) (Inductor on CPU) trains through hk.distribute and hk.Trainer with 2 real Horovod ranks
(tests/workers/compiled.py): ranks identical, the eager run's weights within float tolerance."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(600)]  # may start the shared job


def test_compiled_model_trains_with_identical_ranks(torch_job):
    rows = sorted(tagged_json(torch_job("compiled").stdout, "COMPILED"), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1]
    for name in ("distribute", "trainer"):
        assert rows[0][name]["sha256"] == rows[1][name]["sha256"], name
        assert rows[0][name]["diff_to_eager"] < 1e-5, rows[0][name]
        assert rows[0][name]["moved"] > 1e-3, rows[0][name]
    print({k: v for k, v in rows[0].items() if k.startswith("graph_breaks")})
    assert rows[0]["graph_breaks/plain"]["count"] == 0
