"""Resumes of one Trainer checkpoint with other settings in the code, in one process (Horovod size 1).
Prints ``RESULT {json}`` per scenario: the error, the LR and momentum trained with, hvdkit's warnings."""

import argparse
import json
import logging

import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
args = p.parse_args()
hk.init(threads=1)
warnings: list[str] = []
handler = logging.Handler()
handler.emit = lambda record: warnings.append(record.getMessage())
logging.getLogger("hvdkit").addHandler(handler)
torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))


def train(name, folder, optimizer, epochs, **settings):
    warnings.clear()
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[optimizer](model.parameters(), **settings)
    trainer = hk.Trainer(model, opt, nn.CrossEntropyLoss(), callbacks=[Checkpoint(f"{args.dir}/{folder}")])
    error = None
    try:
        trainer.fit(data, epochs=epochs, batch_size=8)
    except ValueError as exc:
        error = str(exc)
    group = trainer.optimizer.param_groups[0]
    print("RESULT " + json.dumps({"name": name, "error": error, "lr": group["lr"], "momentum": group.get("momentum"),
                                  "warnings": list(warnings)}), flush=True)


train("sgd", "a", "sgd", 1, lr=0.1, momentum=0.9)
train("other settings", "a", "sgd", 2, lr=0.4, momentum=0.5)
train("sgd as adam", "a", "adam", 3, lr=0.1)
train("adam", "b", "adam", 1, lr=0.01)
train("adam as sgd", "b", "sgd", 2, lr=0.01, momentum=0.9)
