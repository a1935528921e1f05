"""torch.compile(model) (Inductor, CPU) trained through hk.distribute and hk.Trainer, 2 workers; prints
``COMPILED {json}`` per rank: hashes of the final weights, their distance to the same run in eager mode,
and what Dynamo reports about graph breaks."""

import hashlib
import json

import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk

hk.init(threads=1)
RANK = hk.rank()
gen = torch.Generator().manual_seed(0)
X = torch.randn(64, 3, 6, 6, generator=gen)
Y = torch.randint(0, 3, (64,), generator=gen)
XS, YS = X[RANK::2], Y[RANK::2]


def build(compiled: bool, sync_bn: bool = False) -> nn.Module:
    torch.manual_seed(5 + RANK)  # different per rank: distribute must broadcast rank 0's weights
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
    if sync_bn:
        net = hk.convert_sync_batchnorm(net)
    return torch.compile(net) if compiled else net


def weights(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def via_distribute(compiled: bool) -> torch.Tensor:
    model = build(compiled)
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    for step in range(6):
        opt.zero_grad()
        i = step * 4
        nn.functional.cross_entropy(model(XS[i:i + 4]), YS[i:i + 4]).backward()
        opt.step()
    return weights(model)


def via_trainer(compiled: bool) -> torch.Tensor:
    model = build(compiled)
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), nn.CrossEntropyLoss())
    trainer.fit(TensorDataset(X[:48], Y[:48]), epochs=1, batch_size=4, shuffle=False)
    return weights(model)


out: dict = {"rank": RANK}
for name, fn in (("distribute", via_distribute), ("trainer", via_trainer)):
    eager, compiled = fn(False), fn(True)
    out[name] = {"sha256": hashlib.sha256(compiled.numpy().tobytes()).hexdigest(),
                 "diff_to_eager": float((compiled - eager).abs().max()),
                 "moved": float((compiled - weights(build(False))).abs().max())}
# What breaks the graph: hk.SyncBatchNorm's allreduce (a Horovod C++ op) inside the forward pass.
torch._dynamo.reset()
for name, sync_bn in (("plain", False), ("sync_batchnorm", True)):
    model = build(False, sync_bn).train()
    explained = torch._dynamo.explain(model)(X[:4])
    out[f"graph_breaks/{name}"] = {"count": explained.graph_break_count,
                                   "reasons": sorted({str(b.reason).splitlines()[0] for b in explained.break_reasons})}
print("COMPILED " + json.dumps(out), flush=True)
