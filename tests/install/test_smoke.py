"""The built Horovod works: allreduce through torch and TensorFlow gives the right sums on both ranks."""

import pytest
from helpers import horovodrun, read_json, requires_horovod

# A slow_check: CI proves the same sums, and more, through torch and TensorFlow in tests/compat/test_horovod_api.py.
pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow_check, pytest.mark.timeout(300)]


def test_torch_and_tensorflow_allreduce(tmp_path):
    horovodrun("smoke_allreduce.py", str(tmp_path))
    for r in (0, 1):
        res = read_json(tmp_path / f"rank{r}.json")
        assert res["size"] == 2 and res["rank"] == r
        assert res["torch_sum"] == [3.0, 30.0]
        assert res["torch_avg"] == [0.5]
        assert res["tf_sum"] == [3.0, 30.0]
        assert (res["tf_rank"], res["tf_size"]) == (r, 2)
