"""Broadcasts of different structures per rank raise on every rank instead of waiting forever; a matching
broadcast still works. Prints ``RESULT {json}`` per rank."""

import json

import torch

import hvdkit.torch as hk

hk.init(threads=1)
r = hk.rank()
out = {"rank": r}
torch.manual_seed(r)

# rank 0: a bare Linear ("weight"); the others: the same layer in a Sequential ("0.weight")
model = torch.nn.Linear(4, 2) if r == 0 else torch.nn.Sequential(torch.nn.Linear(4, 2))
try:
    hk.broadcast_parameters(model.state_dict(), root_rank=0)
except ValueError as exc:
    out["names"] = str(exc)

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1) if r == 0 else torch.optim.Adam(model.parameters(), lr=0.1)
try:
    hk.broadcast_optimizer_state(opt, root_rank=0)
except ValueError as exc:
    out["optimizer"] = str(exc)

# the same structure everywhere: distribute() broadcasts rank 0's weights and optimizer state
model = torch.nn.Linear(4, 2)
opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
out["weight"] = model.weight.detach().tolist()
print("RESULT " + json.dumps(out), flush=True)
