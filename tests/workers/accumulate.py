"""Gradient accumulation (#14 item 4): the Trainer with accumulate_steps=4 and batch 4 against
accumulate_steps=1 and batch 16, same data, same seed, 2 workers. Prints one JSON line per rank:
the max weight difference, the allreduces each run submitted, and the LR of every optimizer step."""

import json

import torch
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import LearningRateWarmup
from hvdkit.core import Callback

hk.init(threads=1)
gen = torch.Generator().manual_seed(0)
data = TensorDataset(torch.randn(256, 8, generator=gen), torch.randint(0, 3, (256,), generator=gen))


class LRs(Callback):
    def __init__(self):
        self.lrs = []

    def on_batch_end(self, state):  # the LR the step just used
        self.lrs.append(round(state.ops.get_lr(), 9))


def train(accumulate_steps, batch_size):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    lrs = LRs()
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9), torch.nn.CrossEntropyLoss(),
                         callbacks=[LearningRateWarmup(warmup_epochs=1), lrs], accumulate_steps=accumulate_steps)
    calls = []
    submit = trainer.optimizer._allreduce_grad_async
    trainer.optimizer._allreduce_grad_async = lambda p: (calls.append(1), submit(p))[1]
    trainer.fit(data, epochs=2, batch_size=batch_size, shuffle=True, seed=3)
    return torch.cat([p.detach().flatten() for p in model.parameters()]), len(calls), lrs.lrs


w_acc, calls_acc, lrs_acc = train(4, 4)
w_big, calls_big, lrs_big = train(1, 16)
print(json.dumps({"rank": hk.rank(), "max_abs_diff": float((w_acc - w_big).abs().max()),
                  "max_abs_weight": float(w_big.abs().max()), "allreduces": [calls_acc, calls_big],
                  "lrs": [lrs_acc, lrs_big]}), flush=True)
