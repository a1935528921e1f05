"""A Trainer run for the non-finite and resume tests: a NaN loss on one rank at one step, or a resume with
other settings. Prints ``RESULT {json}`` per rank (error, skipped steps, weights, LR, checkpoints).

``--policies default,skip,warn`` trains once per non-finite policy in this one job (each from the same
initial weights, into its own ``CHECKPOINT_DIR/POLICY`` folder), so one launch checks all three."""

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint
from hvdkit.core import Callback

p = argparse.ArgumentParser()
p.add_argument("--nonfinite", help="the Trainer's default when not given")
p.add_argument("--policies", help="comma list of --nonfinite values, 'default' for none; one run each")
p.add_argument("--nan-rank", type=int, default=-1)
p.add_argument("--nan-step", type=int, default=-1)
p.add_argument("--nan-in", choices=["gradients", "loss"], default="gradients",
               help="loss: a NaN term that does not depend on the weights (the gradients stay finite)")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--batch", type=int, default=4, help="per rank")
p.add_argument("--accumulate", type=int, default=1)
p.add_argument("--rows", type=int, default=64, help="in all, sharded over the ranks")
p.add_argument("--optimizer", default="sgd")
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--momentum", type=float, default=0.9)
p.add_argument("--checkpoint-dir")
p.add_argument("--keep", type=int, default=2)
args = p.parse_args()

hk.init(threads=1)
rank = hk.rank()
g = np.random.default_rng(3)
x = torch.from_numpy(g.normal(size=(args.rows, 4)).astype(np.float32))
y = torch.from_numpy((x[:, 0] > 0).long().numpy())


class Poison(Callback):
    """Makes this rank's loss NaN at one global step."""

    active = False

    def on_batch_begin(self, state):
        Poison.active = rank == args.nan_rank and state.global_step == args.nan_step


def loss_fn(out, target):
    loss = nn.functional.cross_entropy(out, target)
    if not Poison.active:
        return loss
    return loss * float("nan") if args.nan_in == "gradients" else loss + torch.tensor(float("nan"))


def run(nonfinite, checkpoint_dir):
    torch.manual_seed(0)
    Poison.active = False
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    ckpt = Checkpoint(checkpoint_dir, keep=args.keep, async_save=False) if checkpoint_dir else None
    trainer = hk.Trainer(model, opt, loss_fn, callbacks=[Poison()] + ([ckpt] if ckpt else []),
                         accumulate_steps=args.accumulate, **({"nonfinite": nonfinite} if nonfinite else {}))
    error = None
    try:
        trainer.fit(TensorDataset(x, y), epochs=args.epochs, batch_size=args.batch, shuffle=False)
    except Exception as exc:  # reported, so the test can check every rank's message
        error = f"{type(exc).__name__}: {exc}"
    weights = [p.detach().numpy().ravel().tolist() for p in model.parameters()]
    finite_ckpts = []
    if checkpoint_dir and rank == 0:
        from safetensors.numpy import load_file

        for f in sorted(Path(checkpoint_dir).glob("*.safetensors")):
            finite_ckpts.append([f.name, all(bool(np.isfinite(a).all()) for a in load_file(str(f)).values())])
    print("RESULT " + json.dumps({
        "rank": rank, "policy": nonfinite or "default", "error": error,
        "skipped": getattr(trainer, "skipped_steps", None), "step": trainer.state.global_step,
        "weights_finite": all(math.isfinite(v) for w in weights for v in w), "weights": weights,
        "lr": trainer.optimizer.param_groups[0]["lr"], "target_lr": trainer.state.target_lr,
        "momentum": trainer.optimizer.param_groups[0].get("momentum"), "checkpoints": finite_ckpts}), flush=True)


if args.policies:
    for policy in args.policies.split(","):
        folder = str(Path(args.checkpoint_dir) / policy) if args.checkpoint_dir else None
        run(None if policy == "default" else policy, folder)
else:
    run(args.nonfinite, args.checkpoint_dir)
