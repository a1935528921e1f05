"""A DistributedGradientTape whose variable has a gradient on some ranks only (rank-dependent code) is an
error on every rank naming the variable, eagerly and traced, where Horovod would wait for the missing
allreduce forever; a variable unused on every rank, or registered as local, still works; and a traced
step reduces the same tensors on every rank at every call when ranks optimised it at different times (as
after an elastic reset that adds ranks): Grappler's constant folding runs no allreduce of hvdkit's."""

import pytest
from helpers import have_horovod, horovodrun, tagged_json

pytestmark = [pytest.mark.skipif(not have_horovod("tensorflow"), reason="needs Horovod's TensorFlow build"),
              pytest.mark.horovod]


@pytest.mark.timeout(300)
def test_a_gradient_none_on_some_ranks_only_is_an_error_naming_the_variable():
    # a stall (what Horovod did) shuts the job down after 30 s instead of waiting out the timeout
    proc = horovodrun("tape_none.py", timeout=240, check=False,
                      env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "5", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "30"})
    rows = {(r["case"], r["rank"]): r for r in tagged_json(proc.stdout, "RESULT")}
    assert len(rows) == 10 and proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in (0, 1):
        eager = rows["eager", rank]["error"] or ""
        assert eager.startswith("ValueError: the gradient of a variable is None on some ranks only") and \
            "b:0 (present on 1 of 2 ranks)" in eager and "register_local_source" in eager, eager
        traced = rows["traced", rank]["error"] or ""
        assert "InvalidArgumentError" in traced and "is None on some ranks only" in traced and "b:0" in traced, traced
        assert rows["unused_everywhere", rank] == {"case": "unused_everywhere", "rank": rank, "error": None,
                                                   "result": [[2.0, 4.0], None]}
        assert rows["local_source", rank]["error"] is None
        # a local source keeps its own gradient (Horovod divides it by the size: scale_local_gradients)
        assert rows["local_source", rank]["result"] == [[2.0, 4.0], [0.5] if rank == 0 else None]
        assert rows["retraced_on_rank_1", rank] == {"case": "retraced_on_rank_1", "rank": rank, "error": None,
                                                    "result": [[[2.0, 4.0], [6.0]]] * 3}
