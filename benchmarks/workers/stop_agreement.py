"""Per-step cost of Checkpoint's stop agreement: ``allreduce_mean`` of one value against two, in interleaved
blocks of 200 calls, the order reversed every other block (np=2). Prints rank 0's medians and the ratio."""

import statistics
import time

import hvdkit.torch as hk
from hvdkit.torch.runtime import HorovodComm

hk.init(threads=1)
comm = HorovodComm()
one, two = {"stop": 0.0}, {"stop": 0.0, "usr1": 0.0}
res: dict[str, list[float]] = {"one": [], "two": []}
for _ in range(200):  # untimed
    comm.allreduce_mean(one)
    comm.allreduce_mean(two)
for r in range(20):
    for name, vals in ((("one", one), ("two", two)) if r % 2 == 0 else (("two", two), ("one", one))):
        t0 = time.perf_counter()
        for _ in range(200):
            comm.allreduce_mean(vals)
        res[name].append((time.perf_counter() - t0) / 200 * 1e6)
if hk.rank() == 0:
    for k, v in res.items():
        q = statistics.quantiles(v, n=4)
        print(f"{k}: median {statistics.median(v):.1f} us per call, IQR {q[0]:.1f}-{q[2]:.1f}")
    ratios = [b / a for a, b in zip(res["one"], res["two"])]
    print(f"two/one per block: median {statistics.median(ratios):.3f}")
