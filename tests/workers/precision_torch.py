"""Mixed precision in the PyTorch Trainer (#14 item 1), 2 workers. Prints one JSON line per rank.

fp16 runs (accumulate_steps 1 and 2) get two overflows on rank 1 only:
- step 3: rank 1's loss is multiplied by inf (the overflow reaches the averaged gradients);
- step 6: after the allreduce, one of rank 1's averaged gradients is set to inf (only the agreed
  overflow flag can make rank 0 skip this step too).
For each run: the steps skipped, the loss scale after every step, and a hash of the final weights.
bf16 and fp16 runs without injection: the loss per epoch.
"""

import hashlib
import json

import torch
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.core import Callback

hk.init(threads=1)
RANK = hk.rank()
gen = torch.Generator().manual_seed(0)
X = torch.randn(256, 8, generator=gen)
Y = (X[:, :4].sum(1) > 0).long() + (X[:, 4] > 0.5).long()
DATA = TensorDataset(X, Y)


class Record(Callback):
    def __init__(self, trainer):
        self.trainer = trainer
        self.scales, self.skipped = [], []
        self._seen = 0

    def on_batch_end(self, state):
        p = self.trainer.precision
        if p.skipped_steps > self._seen:
            self.skipped.append(state.global_step - 1)  # global_step counts this step already
            self._seen = p.skipped_steps
        self.scales.append(p.loss_scale)


def model_and_opt():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def run_fp16_with_overflows(k):
    model, opt = model_and_opt()
    calls = {"n": 0}
    ce = torch.nn.CrossEntropyLoss()

    def loss_fn(out, y):
        micro_batch = calls["n"]
        calls["n"] += 1
        loss = ce(out, y)
        if RANK == 1 and micro_batch == 3 * k:  # step 3's first micro-batch
            loss = loss * float("inf")
        return loss

    trainer = hk.Trainer(model, opt, loss_fn, precision="fp16", accumulate_steps=k, progress=False)
    rec = Record(trainer)
    trainer.engine.register(rec)
    sync = trainer.optimizer.synchronize

    def synchronize():
        sync()
        if RANK == 1 and trainer.state.global_step == 6:
            next(iter(model.parameters())).grad.view(-1)[0] = float("inf")

    trainer.optimizer.synchronize = synchronize
    trainer.fit(DATA, epochs=1, batch_size=8, shuffle=True, seed=3)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    return {"skipped": rec.skipped, "scales": rec.scales, "steps": trainer.state.global_step,
            "finite": bool(torch.isfinite(weights).all()),
            "sha256": hashlib.sha256(weights.numpy().tobytes()).hexdigest()}


def run_clean(precision):
    model, opt = model_and_opt()
    trainer = hk.Trainer(model, opt, torch.nn.CrossEntropyLoss(), precision=precision, progress=False)
    hist = trainer.fit(DATA, epochs=4, batch_size=16, shuffle=True, seed=3)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    return {"loss": hist.history["loss"], "skipped": trainer.precision.skipped_steps,
            "sha256": hashlib.sha256(weights.numpy().tobytes()).hexdigest()}


out = {"rank": RANK, "fp16_k1": run_fp16_with_overflows(1), "fp16_k2": run_fp16_with_overflows(2),
       "bf16": run_clean("bf16"), "fp16": run_clean("fp16"), "32": run_clean("32")}
print("PRECISION " + json.dumps(out), flush=True)
