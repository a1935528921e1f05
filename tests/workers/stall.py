"""Two ranks submit differently named allreduces: the stall a rank skipping a collective causes.
Horovod's stall inspector (hvdkit's runtime defaults, or the test's shorter ones) must end the job
with a message naming the tensors and the missing ranks."""

import time

import torch

import hvdkit.torch as hk

hk.init(threads=1)
import horovod.torch as hvd  # noqa: E402

hvd.allreduce(torch.ones(4), name="warmup")  # every rank in step
print(f"rank {hk.rank()}: submitting at {time.time():.3f}", flush=True)
hvd.allreduce(torch.ones(4), name=f"only.rank{hk.rank()}")  # never matched
print("not reached", flush=True)
