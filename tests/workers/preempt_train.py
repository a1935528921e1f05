"""A PyTorch run for the stop-signal tests: it can wait at a given step until a stop signal arrives.

With ``--wait-at-step K`` every rank writes ``waiting.<rank>`` (holding its PID) into --out before step K and
waits there (up to 120 s) until its Checkpoint has seen SIGTERM/SIGUSR1 (it then writes ``seen.<rank>``) or
the test writes ``go.<rank>``; leaving, it writes ``released.<rank>``: the test signals a run that is surely
mid-epoch, and can let one rank on without a signal. ``--hold-save``: rank 0's checkpoint writes after the
first write ``saving.<step>`` once the payload is on disk and wait there until ``release-save`` exists (a long
save, for as long as the test wants). ``--signal-self-at-step K``: every rank sends itself SIGTERM before step K
(a preemption). Prints ``RESULT {...}`` per rank at the end (steps trained in this
process, a digest of the final parameters).
"""

import argparse
import hashlib
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint
from hvdkit.core import Callback

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--wait-at-step", type=int)
p.add_argument("--hold-save", action="store_true")
p.add_argument("--signal-self-at-step", type=int)
args = p.parse_args()
out = Path(args.out)

hk.init(threads=1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Dropout(0.3), nn.Linear(32, 3))
g = np.random.default_rng(7)
x = g.normal(size=(256, 6)).astype(np.float32)
y = (x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 0.5).astype(np.int64)
data = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
ckpt = Checkpoint(out / "ckpt", keep=5)
if args.hold_save:
    store_save = ckpt.store.save

    def held_save(payload, **kw):
        def write(path):
            payload(path)
            if kw["global_step"] > 16:  # the end of epoch 1 saves as usual
                (out / f"saving.{kw['global_step']}").write_text("")
                while not (out / "release-save").exists():
                    time.sleep(0.01)
        return store_save(write, **kw)

    ckpt.store.save = held_save


class Steps(Callback):
    def __init__(self):
        self.trained = []

    def on_batch_begin(self, state):
        if state.global_step == args.wait_at_step:
            rank = hk.rank()
            (out / f"waiting.{rank}").write_text(str(os.getpid()))
            deadline = time.monotonic() + 120
            while ckpt._signals.received is None and not (out / f"go.{rank}").exists() \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            if ckpt._signals.received is not None:
                (out / f"seen.{rank}").write_text("")
            (out / f"released.{rank}").write_text("")

        if state.global_step == args.signal_self_at_step:  # SIGTERM to this rank, seen before the step ends
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 60
            while ckpt._signals.received is None and time.monotonic() < deadline:
                time.sleep(0.01)

    def on_batch_end(self, state):
        self.trained.append(state.global_step)

    def on_epoch_end(self, state):
        print(f"epoch {state.epoch + 1} loss {state.logs['loss']:.4f}")  # as examples print their epoch lines


steps = Steps()
trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), nn.CrossEntropyLoss(),
                     callbacks=[steps, ckpt])
trainer.fit(data, epochs=args.epochs, batch_size=8)
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print("RESULT " + json.dumps({"rank": hk.rank(), "trained": steps.trained, "digest": digest}), flush=True)
