"""Elastic PyTorch run for the integration tests (under horovodrun --min-np/--max-np); the step
records, injected failures and summary are elastic_protocol.py's."""

import time

import torch
from elastic_protocol import StepProtocol, digest, parse_args
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, LearningRateWarmup
from hvdkit.core import Callback

args = parse_args()
hk.init(threads=1)
torch.manual_seed(0)
x = torch.randn(args.samples, 6, generator=torch.Generator().manual_seed(1))
idx = torch.arange(args.samples, dtype=torch.float32).unsqueeze(1)
y = (x[:, :3].sum(1) > 0).long()
data = TensorDataset(torch.cat([idx, x], 1), y)


class Indexed(nn.Module):
    """Column 0 carries the sample index: recorded, not learned from."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
        self.last = []

    def forward(self, inp):
        self.last = inp[:, 0].long().tolist()
        return self.net(inp[:, 1:])


model = Indexed()
protocol = StepProtocol(args, hk.rank())


class Probe(Callback):
    order = 100
    began_from = None

    def on_batch_begin(self, state):
        self.began_from = digest(p.detach().numpy() for p in model.parameters())

    def on_batch_end(self, state):
        protocol.step_done(state.global_step - 1, state.epoch, state.batch, state.comm.size, state.comm.rank,
                           state.ops.get_lr(), model.last, self.began_from)

    def on_reset(self, state):
        protocol.reset(state)


cbs = [Probe()]
if args.warmup_epochs:
    cbs.append(LearningRateWarmup(warmup_epochs=args.warmup_epochs))
ckpt = Checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
if ckpt:
    cbs.append(ckpt)
opt = torch.optim.SGD(model.parameters(), lr=args.lr * hk.size())
trainer = hk.Trainer(model, opt, nn.CrossEntropyLoss(), callbacks=cbs)
t0 = time.monotonic()
hist = hk.fit_elastic(trainer, data, epochs=args.epochs, batch_size=args.batch, commit_every=args.commit_every, seed=3)
if hk.rank() == 0:
    protocol.summary(trainer.state, hist.elastic, hist.epochs_run,
                     None if not ckpt or not ckpt.restored else ckpt.restored.epoch, hist.history, t0)
