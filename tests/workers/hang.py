"""Real hangs from this project's history, at np=2: the hang report must end each one, naming the rank that
is not where the others are and the line it is at (marked ``GUILTY`` below).

    skip_step       rank 1 skips a batch of its own training loop (hk.distribute), so it reaches the end-of-run
                    average while rank 0 still averages the last step's gradients
    broadcast_name  a Trainer callback broadcasts under a name that depends on the rank
    data_loader     rank 1's dataset retries a read that never succeeds, inside Trainer.fit
    elastic_loader  the same inside fit_elastic (hvdkit elastic-local)
"""

import sys

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

import hvdkit.torch as hk
from hvdkit.core import Callback

case = sys.argv[1]
hk.init(threads=1)
import horovod.torch as hvd  # noqa: E402

r = hk.rank()
torch.manual_seed(0)
model = nn.Linear(4, 2)
x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
print(f"rank {r}: case {case}", flush=True)


class NeverReady(Dataset):
    """A dataset whose 10th read on rank 1 never succeeds (retried forever)."""

    reads = 0

    def __len__(self):
        return len(x)

    def __getitem__(self, i):
        NeverReady.reads += 1
        while r == 1 and NeverReady.reads == 10: pass  # GUILTY: data_loader
        return x[i], y[i]


class RankNamedBroadcast(Callback):
    def on_epoch_end(self, state):
        if state.epoch == 1:
            hvd.broadcast(torch.zeros(3), root_rank=0, name=f"best_metric.{r}")  # GUILTY: broadcast_name


if case == "skip_step":
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1))
    for step in range(6):
        if r == 1 and step == 3:
            continue
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[step * 4:step * 4 + 4]), y[step * 4:step * 4 + 4]).backward()
        opt.step()
    hvd.allreduce(torch.ones(1), name="final_loss")  # GUILTY: skip_step (where rank 1 is when rank 0 waits)
elif case == "broadcast_name":
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.functional.cross_entropy,
                         callbacks=[RankNamedBroadcast()], progress=False)
    trainer.fit(TensorDataset(x, y), epochs=3, batch_size=4)
elif case == "data_loader":
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.functional.cross_entropy,
                         progress=False)
    trainer.fit(NeverReady(), epochs=2, batch_size=4)
elif case == "elastic_loader":
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.functional.cross_entropy,
                         progress=False)
    hk.fit_elastic(trainer, NeverReady(), epochs=2, batch_size=4)
print(f"rank {r}: not reached", flush=True)
