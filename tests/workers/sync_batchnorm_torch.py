"""hk.SyncBatchNorm across workers: each of N workers holds batch b of a global batch N*b;
the reference is torch's BatchNorm on the whole batch in one process (computed on every rank).
Prints one JSON line per rank with the max abs errors, then trains a converted model with the Trainer."""

import hashlib
import json

import horovod.torch as hvd
import torch
from torch.utils.data import TensorDataset

import hvdkit.torch as hk

hk.init(threads=1)
R, N = hk.rank(), hk.size()
B = 8  # per worker
gen = torch.Generator().manual_seed(0)
X = torch.randn(N * B, 4, 5, 5, generator=gen) * 3 + 1.5  # global batch, channel means away from 0
W = torch.randn(N * B, 4, 5, 5, generator=gen)  # fixed weights of the loss sum(out * W)


def make(cls):
    torch.manual_seed(1)
    bn = cls(4, momentum=0.3)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


ref = make(torch.nn.BatchNorm2d)
xr = X.clone().requires_grad_(True)
out_ref = ref(xr)
loss_ref = (out_ref * W).sum() / (N * B)  # mean over the global batch
loss_ref.backward()

sync = hk.convert_sync_batchnorm(make(torch.nn.BatchNorm2d))
assert type(sync) is hk.SyncBatchNorm
part = slice(R * B, (R + 1) * B)
xs = X[part].clone().requires_grad_(True)
out = sync(xs)
loss = (out * W[part]).sum() / B  # each worker's mean; the optimizer averages gradients over workers
loss.backward()
param_grads = [hvd.allreduce(p.grad, op=hvd.Average) for p in (sync.weight, sync.bias)]


def err(a, b):
    return float((a - b).abs().max())


errors = {
    "output": err(out, out_ref[part]),
    "running_mean": err(sync.running_mean, ref.running_mean),
    "running_var": err(sync.running_var, ref.running_var),
    "grad_weight": err(param_grads[0], ref.weight.grad),
    "grad_bias": err(param_grads[1], ref.bias.grad),
    # rank r's input gradient is d(sum of every worker's loss)/dx_r: N times the global-mean loss's
    "grad_input": err(xs.grad / N, xr.grad[part]),
}
# eval mode uses the (synchronised) running statistics: same as the reference's
sync.eval()
ref.eval()
errors["eval_output"] = err(sync(X[part]), ref(X[part]))
# without synchronisation the local statistics differ visibly (the test is not vacuous)
local = make(torch.nn.BatchNorm2d)
local_gap = err(local(X[part]), out_ref[part])

# a converted model trains with the Trainer (SyncBN's allreduces in forward and backward alongside
# Horovod's gradient hooks); the replicas stay identical
torch.manual_seed(2)
model = hk.convert_sync_batchnorm(torch.nn.Sequential(
    torch.nn.Conv2d(4, 6, 3), torch.nn.BatchNorm2d(6), torch.nn.ReLU(), torch.nn.Flatten(),
    torch.nn.Linear(6 * 3 * 3, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3)))
converted = sum(isinstance(m, hk.SyncBatchNorm) for m in model.modules())
y = torch.randint(0, 3, (128,), generator=gen)
data = TensorDataset(torch.randn(128, 4, 5, 5, generator=gen) + y.view(-1, 1, 1, 1).float(), y)
trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), torch.nn.CrossEntropyLoss(),
                     progress=False)
hist = trainer.fit(data, epochs=3, batch_size=16, seed=1)
state = torch.cat([t.detach().float().flatten() for t in model.state_dict().values()])
print("SYNCBN " + json.dumps({"rank": R, "size": N, "errors": errors, "local_gap": local_gap, "converted": converted,
                              "loss": hist.history["loss"],
                              "sha256": hashlib.sha256(state.numpy().tobytes()).hexdigest()}), flush=True)
