"""ProcessSetComm: ranks, roots and results relative to the set (a fake 4-rank world)."""

import pytest

from hvdkit.callbacks import Checkpoint, MetricAverage
from hvdkit.core.comm import LocalComm
from hvdkit.core.process_set import ProcessSetComm, check_process_set, scoped


class FakeSet:
    def __init__(self, ranks):
        self.ranks = ranks

    def included(self):
        return True


class World(LocalComm):
    """Rank 3 of 4; allgather returns each rank's object tagged with its rank."""

    def __init__(self):
        super().__init__(size=4)

    @property
    def rank(self):
        return 3

    def allgather_object(self, obj):
        return [(r, obj) for r in range(4)]


def test_ranks_roots_and_results_are_relative_to_the_set():
    comm = ProcessSetComm(World(), FakeSet([3, 1]))
    assert (comm.rank, comm.size, comm.is_root) == (1, 2, False)
    assert comm.allgather_object("x") == [(1, "x"), (3, "x")]
    assert comm.broadcast_object("x", 0) == (1, "x")
    assert scoped(World(), None).size == 4


def test_a_set_without_this_rank_and_non_sets_are_refused():
    with pytest.raises(ValueError, match=r"does not include this process \(rank 3\)"):
        ProcessSetComm(World(), FakeSet([0, 2]))
    for bad in ([0, 2], "stage0"):
        with pytest.raises(ValueError, match=r"process_set must be None or a Horovod ProcessSet .*got "):
            check_process_set(bad)
    with pytest.raises(ValueError, match="process_set must be None"):
        MetricAverage(process_set=[0, 2])
    with pytest.raises(ValueError, match="process_set must be None"):
        Checkpoint("ck", process_set=(0, 2))
