"""How much CPU a rank's training thread burns while it waits for a collective (patch 0007).

Rank 1 arrives ``LATE`` seconds after rank 0 at an allreduce, so rank 0's ``synchronize`` waits that long
(the sleep makes the wait to be measured; nothing is synchronised by it: the allreduce before it lines the
ranks up). Each rank prints, tag WAIT, the wall time of its wait and the CPU time its own thread used in it
(``time.thread_time``), the result, and what waiting again on the released handle raised.
"""

import json
import time

import horovod.torch as horovod
import torch
from horovod.torch.mpi_ops import mpi_lib

import hvdkit.torch as hk

LATE = 1.0

hk.init(threads=1)
rank = horovod.rank()
horovod.allreduce(torch.ones(4), name="line_up")
if rank == 1:
    time.sleep(LATE)
handle = horovod.allreduce_async(torch.full((4,), float(rank + 1)), op=horovod.Sum, name="late")
wall, cpu = time.perf_counter(), time.thread_time()
result = horovod.synchronize(handle)
wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
try:  # the extension's own wait (horovod.synchronize returns early for a handle it has released)
    mpi_lib.horovod_torch_wait_and_clear(handle)  # released above: must raise, not wait forever
    again = None
except Exception as e:  # reported: the test checks what it was
    again = f"{type(e).__name__}: {e}"
print("WAIT " + json.dumps({"rank": rank, "wall_s": wall, "cpu_s": cpu, "sum": result.tolist(), "again": again}),
      flush=True)
