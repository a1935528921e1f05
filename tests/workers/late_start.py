"""Rank 1 never reaches ``hk.init()`` (stuck before it, as on a node whose file system hangs): the ranks that
did must say so and end the job instead of waiting in Horovod's init for ever."""

import os
import threading

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ["HOROVOD_RANK"])
if rank == 1:
    threading.Event().wait()  # never set: this rank is stuck before init
import hvdkit.torch as hk  # noqa: E402

hk.init(threads=1)  # CALLS INIT
print(f"rank {rank}: not reached", flush=True)
