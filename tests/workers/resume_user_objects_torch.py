"""A resume must train with the optimizer the user built and the LR schedulers attached to it (2 ranks).

For each scheduler: 2 epochs with checkpoints, then, as a restarted script does, a new model, optimizer and
scheduler resume that folder to epoch 4; a third run trains 4 epochs without a stop. Prints ``RESULT {json}``
per scheduler and rank: the LR each step of epochs 3-4 trained with (read from the optimizer that steps),
for the resumed and the uninterrupted run, and whether the user's optimizer still shares the trained
optimizer's parameter groups after the resume.
"""

import argparse
import gc
import json
import warnings
from collections import Counter

import torch
from torch import nn
from torch.optim import lr_scheduler
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, LearningRateSchedule, LearningRateWarmup
from hvdkit.core import Callback

warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)`")  # Horovod's step wraps it
p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
args = p.parse_args()
hk.init(threads=1)
g = torch.Generator().manual_seed(3)
data = TensorDataset(torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g))


class StepEachEpoch(Callback):
    """How a user drives a torch scheduler from the Trainer; its state resumes with the checkpoint."""

    def __init__(self, scheduler):
        self.scheduler = scheduler

    def on_epoch_end(self, state):
        self.scheduler.step()

    def state_dict(self):  # MultiStepLR keeps its milestones in a Counter: a plain dict in the checkpoint
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in self.scheduler.state_dict().items()}

    def load_state_dict(self, state):
        self.scheduler.load_state_dict({k: Counter({int(m): n for m, n in v.items()}) if k == "milestones" else v
                                        for k, v in state.items()})


class TrainedLR(Callback):
    def __init__(self, optimizer):
        self.optimizer, self.lrs = optimizer, []

    def on_batch_end(self, state):
        if state.epoch >= 2:
            self.lrs.append(self.optimizer.param_groups[0]["lr"])


SCHEDULERS = {
    "StepLR": lambda opt: [StepEachEpoch(lr_scheduler.StepLR(opt, step_size=1, gamma=0.5))],
    "StepLR(step_size=3)": lambda opt: [StepEachEpoch(lr_scheduler.StepLR(opt, step_size=3, gamma=0.1))],
    "MultiStepLR": lambda opt: [StepEachEpoch(lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.3))],
    "ExponentialLR": lambda opt: [StepEachEpoch(lr_scheduler.ExponentialLR(opt, gamma=0.7))],
    "CosineAnnealingLR": lambda opt: [StepEachEpoch(lr_scheduler.CosineAnnealingLR(opt, T_max=4))],
    "LambdaLR": lambda opt: [StepEachEpoch(lr_scheduler.LambdaLR(opt, lambda epoch: 1 / (1 + epoch)))],
    # what docs/pytorch.md shows: hvdkit's warm-up and cosine callbacks
    "LearningRateWarmup+cosine": lambda opt: [LearningRateWarmup(warmup_epochs=1),
                                              LearningRateSchedule.cosine(end_epoch=4, start_epoch=1)],
}


def train(folder, name, epochs):
    gc.collect()  # the last run's Checkpoint (in a cycle with its engine) lets go of the folder's writer lock
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = hk.Trainer(model, opt, nn.CrossEntropyLoss(), callbacks=[*SCHEDULERS[name](opt), Checkpoint(folder)])
    trained = TrainedLR(trainer.optimizer)
    trainer.engine.register(trained)
    trainer.fit(data, epochs=epochs, batch_size=8)
    shared = all(a is b for a, b in zip(opt.param_groups, trainer.optimizer.param_groups))
    return trained.lrs, shared, opt.param_groups[0]["lr"], trainer.optimizer.param_groups[0]["lr"]


for k, name in enumerate(SCHEDULERS):
    train(f"{args.dir}/{k}/a", name, 2)
    resumed, shared, user_lr, trained_lr = train(f"{args.dir}/{k}/a", name, 4)
    whole, _, _, _ = train(f"{args.dir}/{k}/b", name, 4)
    print("RESULT " + json.dumps({"scheduler": name, "rank": hk.rank(), "resumed": resumed, "whole": whole,
                                  "shared": shared, "user_lr": user_lr, "trained_lr": trained_lr}), flush=True)
