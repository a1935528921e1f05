"""On a GPU: Horovod allreduce of CUDA tensors through NCCL, and DistributedOptimizer steps on CUDA."""

import json
import sys

import horovod.torch as hvd
import torch

out = sys.argv[1]
hvd.init()
torch.cuda.set_device(hvd.local_rank())
dev = torch.device("cuda", hvd.local_rank())
res = {"nccl_built": bool(hvd.nccl_built()), "size": hvd.size(), "device": torch.cuda.get_device_name(dev)}
x = torch.arange(1 << 20, device=dev, dtype=torch.float32) * (hvd.rank() + 1)
y = hvd.allreduce(x, op=hvd.Sum, name="gpu.sum")
expected = torch.arange(1 << 20, device=dev, dtype=torch.float32) * sum(r + 1 for r in range(hvd.size()))
res["allreduce_ok"] = bool(torch.equal(y, expected)) and y.is_cuda

import hvdkit.torch as hk  # noqa: E402

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1))
data = torch.randn(64, 256, device=dev)
target = torch.randint(0, 10, (64,), device=dev)
losses = []
for _ in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(data), target)
    loss.backward()
    opt.step()
    losses.append(loss.item())
res["loss_first_last"] = [losses[0], losses[-1]]
res["trained"] = losses[-1] < losses[0]
with open(f"{out}/gpu_rank{hvd.rank()}.json", "w") as f:
    json.dump(res, f, indent=2)
print(json.dumps(res))
