"""Horovod shut down and initialised again in the same process, as every elastic reset does
(``horovod.torch.elastic``'s reset: ``shutdown()`` then ``init()``), with hvdkit's tuning in force.

``hk.init`` sets Horovod's cycle time and, on the CPU, its fusion threshold in the environment
(``hvdkit.runtime.tuning``); both are then "fixed" in Horovod's parameter manager, which outlives
``shutdown()``. Horovod 0.28.1 as released segfaults in its background thread at the next ``init()``
(patch 0006). Each round allreduces this rank's number and prints what it got (tag REINIT).
"""

import json
import os

import horovod.torch as horovod
import torch

import hvdkit.torch as hk

hk.init(threads=1)
tuned = {k: os.environ.get(k) for k in ("HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD")}
sums = []
for round_ in range(3):
    if round_:
        horovod.shutdown()
        horovod.init()
    x = torch.full((4,), float(horovod.rank() + 1))
    sums.append(horovod.allreduce(x, op=horovod.Sum, name=f"reinit.{round_}").tolist())
print("REINIT", json.dumps({"rank": horovod.rank(), "size": horovod.size(), "tuned": tuned, "sums": sums}),
      flush=True)
