"""A small deterministic training run for the PyTorch integration tests.

Writes, per rank, ``rank<r>.npz`` (final parameters) and ``rank<r>.json``
(LR used at each step, history, resume info) into --out.
"""

import argparse
import json

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, LearningRateWarmup, MetricAverage
from hvdkit.core import Callback

p = argparse.ArgumentParser()
p.add_argument("--results", required=True)
p.add_argument("--batch", type=int, default=8, help="per worker")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--lr", type=float, default=0.1, help="optimizer LR as built (target LR)")
p.add_argument("--momentum", type=float, default=0.0)
p.add_argument("--warmup-epochs", type=float, default=0.0)
p.add_argument("--checkpoint-dir")
p.add_argument("--model-seed-per-rank", action="store_true", help="build the model with a different seed per rank")
p.add_argument("--n", type=int, default=64)
args = p.parse_args()

hk.init(threads=1)
r = hk.rank()
torch.manual_seed(1000 + (r if args.model_seed_per_rank else 0))
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
initial = [p.detach().clone().numpy() for p in model.parameters()]

g = np.random.default_rng(7)
x = g.normal(size=(args.n, 6)).astype(np.float32)
y = (x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 0.5).astype(np.int64)
data = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)


class RecordLR(Callback):
    def __init__(self):
        self.lrs = []

    def on_batch_end(self, state):
        self.lrs.append([state.global_step - 1, state.ops.get_lr()])


rec = RecordLR()
cbs = [rec, MetricAverage()]
if args.warmup_epochs:
    cbs.append(LearningRateWarmup(warmup_epochs=args.warmup_epochs))
ckpt = Checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
if ckpt:
    cbs.append(ckpt)
trainer = hk.Trainer(model, opt, nn.CrossEntropyLoss(), callbacks=cbs)
after_broadcast = [p.detach().clone().numpy() for p in model.parameters()]
hist = trainer.fit(data, epochs=args.epochs, batch_size=args.batch, seed=3)

params = [p.detach().numpy() for p in model.parameters()]
np.savez(f"{args.results}/rank{r}.npz", *params)
np.savez(f"{args.results}/rank{r}_init.npz", *initial)
np.savez(f"{args.results}/rank{r}_bcast.npz", *after_broadcast)
with open(f"{args.results}/rank{r}.json", "w") as f:
    json.dump({"size": hk.size(), "lrs": rec.lrs, "history": hist.history, "epochs_run": hist.epochs_run,
               "steps_per_epoch": trainer.state.steps_per_epoch,
               "resumed_from": None if not ckpt or not ckpt.restored else ckpt.restored.epoch,
               "global_step": trainer.state.global_step}, f)
