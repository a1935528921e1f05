"""Under horovodrun -np 2: Horovod's torch names through ``import hvdkit.torch as hvd``; each rank writes
what it saw to OUT/rank<r>.json (the test compares the ranks and checks the values)."""

import json
import os
import sys
from pathlib import Path

import torch

import hvdkit.torch as hvd

out = Path(sys.argv[1])
os.environ["HOROVOD_TIMELINE"] = "DYNAMIC"  # Horovod's switch for start_timeline()/stop_timeline()
hvd.init(comm=None, process_sets="dynamic")  # Horovod's init signature
r, n = hvd.rank(), hvd.size()
ps = hvd.add_process_set([n - 1]) if n > 1 else hvd.global_process_set  # the last rank alone
res: dict = {"rank": r, "size": n, "is_initialized": hvd.is_initialized(), "mpi_built": bool(hvd.mpi_built()),
             "gloo_built": bool(hvd.gloo_built()), "nccl_built": bool(hvd.nccl_built())}

# collectives
x = torch.tensor([r + 1.0, 10.0 * (r + 1)])
res["allreduce_avg"] = hvd.allreduce(x, name="avg").tolist()
res["allreduce_sum"] = hvd.allreduce(x, op=hvd.Sum, name="sum").tolist()
if r == n - 1:
    res["allreduce_pset"] = hvd.allreduce(x, op=hvd.Sum, name="pset", process_set=ps).tolist()
if n > 1:
    hvd.remove_process_set(ps)
res["allreduce_max"] = hvd.allreduce(x, op=hvd.Max, name="max").tolist()
y = x.clone()
hvd.allreduce_(y, op=hvd.Sum, name="inplace")
res["allreduce_inplace"] = y.tolist()
h = hvd.allreduce_async(x, op=hvd.Sum, name="async")
res["allreduce_async"] = hvd.synchronize(h).tolist()
res["allreduce_fp16"] = hvd.allreduce(x, compression=hvd.Compression.fp16, op=hvd.Sum, name="fp16").tolist()
res["grouped_allreduce"] = [t.tolist() for t in hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="grouped")]
res["allgather"] = hvd.allgather(torch.full((r + 1, 2), float(r)), name="gather").tolist()
res["allgather_async"] = hvd.synchronize(hvd.allgather_async(torch.tensor([float(r)]), name="gather_a")).tolist()
res["broadcast"] = hvd.broadcast(torch.tensor([float(r + 5)]), root_rank=n - 1, name="bcast").tolist()
z = torch.tensor([float(r + 7)])
hvd.broadcast_(z, root_rank=0, name="bcast_inplace")
res["broadcast_inplace"] = z.tolist()
res["alltoall"] = hvd.alltoall(torch.tensor([10.0 * r, 10.0 * r + 1]), name="a2a").tolist()
res["broadcast_object"] = hvd.broadcast_object({"from": r}, root_rank=n - 1)
res["allgather_object"] = hvd.allgather_object(r * 3)
res["reducescatter"] = hvd.reducescatter(torch.tensor([1.0 + r, 2.0, 3.0, 4.0]), op=hvd.Sum, name="rs").tolist()


def one_step(seed_offset: int, **kwargs) -> list:
    """A 3->1 linear model, different data per rank; every rank starts from rank 0's weights."""
    torch.manual_seed(100 + r + seed_offset)
    model = torch.nn.Linear(3, 1, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    res.setdefault("start_weights", {})[str(seed_offset)] = model.weight.detach().flatten().tolist()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), **kwargs)
    bpps = kwargs.get("backward_passes_per_step", 1)
    for k in range(bpps):
        data = torch.full((1, 3), float(r + 1 + k))
        model(data).sum().backward()  # grad = data (the same for every weight)
    opt.step()
    return model.weight.detach().flatten().tolist()


res["opt_average"] = one_step(0)
res["opt_sum"] = one_step(1, op=hvd.Sum)
res["opt_fp16"] = one_step(2, compression=hvd.Compression.fp16)
res["opt_predivide"] = one_step(3, gradient_predivide_factor=2.0)
res["opt_bpps2"] = one_step(4, backward_passes_per_step=2)
res["opt_adasum"] = one_step(5, op=hvd.Adasum)

# join: rank 1 joins after one more allreduce than rank 0 has; join returns the last rank to join
if r == 1:
    hvd.allreduce(torch.tensor([1.0]), name="extra")
res["join"] = int(hvd.join())

# timeline on demand
timeline = out / "timeline.json"
hvd.start_timeline(str(timeline))
hvd.allreduce(torch.tensor([1.0]), name="timed")
hvd.stop_timeline()
res["timeline_written"] = r != 0 or (timeline.exists() and "timed" in timeline.read_text())

res["elastic"] = [callable(getattr(hvd.elastic, n)) for n in ("run", "TorchState", "ElasticSampler", "ObjectState")]
(out / f"rank{r}.json").write_text(json.dumps(res))
hvd.shutdown()
