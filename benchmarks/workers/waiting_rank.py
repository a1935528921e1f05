"""What a rank that waits costs the rank that works (Horovod patch 0007).

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.waiting_rank --results r.json

Every round, rank 0 runs a matmul workload on ``--threads`` threads (as a rank that evaluates, saves a
checkpoint or feeds data-loader workers does) while the other ranks wait for it in an allreduce. Reported
(the first round is not timed): rank 0's work time per round, and the CPU time the waiting ranks' threads
used in that wait (``time.thread_time``). Horovod 0.28.1's wait spun on ``std::this_thread::yield()``,
so a waiting rank took a core from the one working; with hvdkit's patch 0007 it blocks.
"""

from __future__ import annotations

import argparse
import os
import time

import horovod.torch as horovod  # the collectives themselves: what is measured is Horovod's wait
import torch

import hvdkit.torch as hk
from benchmarks.workers.common import median, positive, quartiles, timed_count, write_result


def main() -> None:
    """Rank 0 works while the others wait; write the timings."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", required=True)
    p.add_argument("--rounds", type=timed_count, default=6, help="the first is not timed")
    p.add_argument("--threads", type=positive, default=os.cpu_count() or 1, help="rank 0's compute threads")
    p.add_argument("--matmuls", type=positive, default=200, help="1024x1024 matmuls per round on rank 0")
    args = p.parse_args()

    hk.init(threads=1)
    if hk.rank() == 0:
        torch.set_num_threads(args.threads)

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    work, waited = [], []
    for r in range(args.rounds):
        horovod.allreduce(torch.ones(1), name=f"waiting_rank.line_up.{r}")
        cpu = time.thread_time()
        if hk.rank() == 0:
            t = time.perf_counter()
            for _ in range(args.matmuls):
                a @ b
            work.append(time.perf_counter() - t)
        horovod.allreduce(torch.ones(1), name=f"waiting_rank.join.{r}")
        waited.append(time.thread_time() - cpu)
    # each rank's thread CPU per round, gathered on rank 0
    cpus = horovod.allgather(torch.tensor([waited], dtype=torch.float64)).tolist()
    if hk.rank() == 0:
        waiting = [row[1:] for row in cpus[1:]]
        write_result(args.results, {
            "size": hk.size(), "threads_rank0": torch.get_num_threads(), "matmuls": args.matmuls,
            "work_s_median": median(work[1:]), "work_s_quartiles": quartiles(work[1:]), "work_s": work,
            "waiting_cpu_s_median": median([c for row in waiting for c in row]), "waiting_cpu_s": waiting})


if __name__ == "__main__":
    main()
