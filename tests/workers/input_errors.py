"""One process (Horovod size 1) runs the bad inputs and faults one after the other, each on a fresh model
and seed; prints ``=== case NAME`` then what happened (#13 items 6, 8, 9). A case that needs a folder is
given as ``NAME=FOLDER``.

    python input_errors.py CASE[=FOLDER] [CASE[=FOLDER] ...]
"""

import os
import pickle
import sys

import torch
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, MetricsLogger
from hvdkit.core import Callback, CheckpointStore

hk.init(threads=1)


class Count(Callback):
    steps = 0
    ended = False

    def on_batch_begin(self, state):
        Count.steps += 1

    def on_train_end(self, state):
        Count.ended = True


class Boom(Callback):
    def on_batch_end(self, state):
        if state.global_step == 3:
            raise RuntimeError("boom at step 3")


def trainer(*callbacks):
    model = torch.nn.Linear(4, 2)
    return hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                      callbacks=[Count(), *callbacks])


def run(case, folder):
    torch.manual_seed(0)
    x, y = torch.randn(40, 4), torch.randint(0, 2, (40,))
    train = TensorDataset(x, y)
    Count.steps, Count.ended = 0, False
    try:
        if case == "val-wrong-shape":
            trainer().fit(train, epochs=2, batch_size=8,
                          validation_data=TensorDataset(torch.randn(10, 7), torch.zeros(10).long()))
        elif case == "val-wrong-labels":
            trainer().fit(train, epochs=2, batch_size=8,
                          validation_data=TensorDataset(torch.randn(10, 4), torch.full((10,), 5)))
        elif case == "val-empty":
            trainer().fit(train, epochs=2, batch_size=8,
                          validation_data=TensorDataset(torch.randn(0, 4), torch.zeros(0).long()))
        elif case == "train-empty":
            trainer().fit(TensorDataset(torch.randn(0, 4), torch.zeros(0).long()), epochs=2, batch_size=8)
        elif case == "second-fit":
            t = trainer()
            t.fit(train, epochs=2, batch_size=8)
            t.fit(train, epochs=2, batch_size=8)
        elif case == "exception-mid-fit":
            trainer(Boom(), MetricsLogger(os.path.join(folder, "m.csv"))).fit(train, epochs=2, batch_size=8)
        elif case == "malicious-checkpoint":
            class Evil:
                def __reduce__(self):
                    return (os.system, (f"touch {folder}/PWNED",))

            store = CheckpointStore(folder)
            store.save(pickle.dumps({"framework": Evil()}), state={"framework": {"__tensor__": "framework"}},
                       epoch=1, global_step=5, world_size=1, framework="torch")
            store.flush()
            trainer(Checkpoint(folder)).fit(train, epochs=2, batch_size=8)
        elif case == "accumulate-too-few":
            model = torch.nn.Linear(4, 2)
            hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                       callbacks=[Count()], accumulate_steps=8).fit(train, epochs=2, batch_size=8)
        elif case == "accumulate-mismatch":
            model = torch.nn.Linear(4, 2)
            opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1), accumulate_steps=2)
            hk.Trainer(model, opt, torch.nn.CrossEntropyLoss(), accumulate_steps=4)
        else:
            raise SystemExit(f"unknown case {case}")
    except Exception as exc:
        print(f"ERROR {type(exc).__name__}: {exc}", flush=True)
    print(f"steps={Count.steps} train_end={Count.ended}", flush=True)


for arg in sys.argv[1:]:
    name, _, path = arg.partition("=")
    print(f"=== case {name}", flush=True)
    run(name, path or None)
