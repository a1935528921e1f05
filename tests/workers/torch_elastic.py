"""Elastic PyTorch run for the integration tests (under horovodrun --min-np/--max-np).

Each rank appends one JSON line per step to <results>/steps-rank<r>-pid<pid>.jsonl (flushed, so a
SIGKILLed worker's steps survive) with the sample indices it trained; rank 0 writes a summary.
"""

import argparse
import json
import os
import signal
import time

import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, LearningRateWarmup
from hvdkit.core import Callback

p = argparse.ArgumentParser()
p.add_argument("--results", required=True)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--samples", type=int, default=96)
p.add_argument("--lr", type=float, default=0.05, help="single-worker LR")
p.add_argument("--commit-every", type=int, default=5)
p.add_argument("--warmup-epochs", type=float, default=0)
p.add_argument("--kill-at-step", type=int, default=-1, help="rank 1 SIGKILLs itself at this global step")
p.add_argument("--hosts-file")
p.add_argument("--remove-at-step", type=int, default=-1, help="rank 0 removes 127.0.0.1 from the hosts file")
p.add_argument("--add-back", action="store_true", help="after the removal, rank 0 puts the host back and waits")
p.add_argument("--checkpoint-dir")
args = p.parse_args()

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
log = open(os.path.join(args.results, f"steps-rank{hk.rank()}-pid{os.getpid()}.jsonl"), "a", buffering=1)
state_file = os.path.join(args.results, "events.json")


class Probe(Callback):
    order = 100

    def on_batch_end(self, state):
        step = state.global_step - 1
        rec = {"step": step, "epoch": state.epoch, "batch": state.batch, "size": state.comm.size,
               "rank": state.comm.rank, "lr": state.ops.get_lr(), "samples": model.last}
        log.write(json.dumps(rec) + "\n")
        if step == args.kill_at_step and state.comm.rank == 1 and state.comm.size == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        if state.comm.rank == 0 and step == args.remove_at_step and state.comm.size == 2:
            with open(args.hosts_file, "w") as f:
                f.write("localhost:1\n")
            events["removed_at"] = step
            events["waiting_for"] = 1
        # Horovod's driver polls the discovery script about once a second and the change lands at
        # the next commit: while a requested change is pending, rank 0 slows its steps (bounded by
        # the number of steps left) so that the run does not end first.
        if events.get("waiting_for") is not None:
            if state.comm.size == events["waiting_for"] and not (args.add_back and state.comm.size == 1):
                events["waiting_for"] = None
            else:
                time.sleep(0.05)

    def on_reset(self, state):
        events.setdefault("resets", []).append({"size": state.comm.size, "step": state.global_step,
                                                "epoch": state.epoch, "batch": state.batch})
        if args.add_back and state.comm.rank == 0 and state.comm.size == 1:
            with open(args.hosts_file, "w") as f:
                f.write("localhost:1\n127.0.0.1:1\n")
            events["waiting_for"] = 2


events: dict = {}
cbs = [Probe()]
if args.warmup_epochs:
    cbs.append(LearningRateWarmup(warmup_epochs=args.warmup_epochs))
ckpt = Checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
if ckpt:
    cbs.append(ckpt)
opt = torch.optim.SGD(model.parameters(), lr=args.lr * hk.size())
trainer = hk.Trainer(model, opt, nn.CrossEntropyLoss(), callbacks=cbs)
t0 = time.monotonic()
hist = trainer.fit_elastic(data, epochs=args.epochs, batch_size=args.batch, commit_every=args.commit_every, seed=3)
if hk.rank() == 0:
    summary = {"epochs_run": hist.epochs_run, "final_epoch": trainer.state.epoch, "size": hk.size(),
               "global_step": trainer.state.global_step, "resets": trainer.elastic.resets,
               "recovery_seconds": trainer.elastic.recovery_seconds, "events": events,
               "resumed_from": None if not ckpt or not ckpt.restored else ckpt.restored.epoch,
               "wall_seconds": time.monotonic() - t0}
    with open(os.path.join(args.results, "summary.json"), "w") as f:
        json.dump(summary, f)
    print("recovery seconds:", summary["recovery_seconds"], flush=True)
