"""Under horovodrun -np 2: ``hvdkit.torch.init()``, one allreduce, then time Horovod's shutdown (its
``MPI_Finalize``). Prints ``SHUTDOWN {"rank", "btl", "seconds"}`` per rank."""

import json
import os
import time

import horovod.torch as hvd
import torch

import hvdkit.torch as hk

hk.init(threads=1)
hvd.allreduce(torch.ones(4), name="mpi_shutdown.probe")
start = time.perf_counter()
hvd.shutdown()
print("SHUTDOWN " + json.dumps({"rank": int(os.environ["OMPI_COMM_WORLD_RANK"]), "btl": os.environ.get("OMPI_MCA_btl"),
                                "seconds": time.perf_counter() - start}), flush=True)
