"""Elastic digit classification: training that survives workers leaving and joining.

On one machine (two local "hosts", localhost and 127.0.0.1; edit the printed hosts file to
remove or add one while it runs, or kill a worker):

    hvdkit elastic-local --np 2 --min-np 1 -- python examples/pytorch_elastic.py --epochs 20

On a cluster, with your own discovery script:

    horovodrun -np 4 --min-np 2 --max-np 8 --host-discovery-script ./discover.sh \\
        python examples/pytorch_elastic.py --checkpoint-dir /shared/ckpt

State is committed in memory every --commit-every steps and at each epoch end; a failed worker
rolls the survivors back to the last commit, the rest of the epoch is re-sharded, and the LR
follows the linear scaling rule. With --checkpoint-dir, a job killed as a whole resumes from the
newest valid checkpoint when started again.
"""

from __future__ import annotations

import argparse

import _digits
import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, LearningRateWarmup, MetricAverage, MetricsLogger
from hvdkit.torch.trainer import accuracy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05, help="single-worker LR; scaled by the number of workers")
    p.add_argument("--warmup-epochs", type=float, default=1)
    p.add_argument("--commit-every", type=int, default=10, help="steps between in-memory commits")
    p.add_argument("--checkpoint-dir", help="resume a whole-job restart from here")
    args = p.parse_args()

    hk.init()
    torch.manual_seed(0)
    x_tr, y_tr, x_val, y_val = _digits.load()
    train = TensorDataset(torch.from_numpy(x_tr), torch.from_numpy(y_tr))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hk.size(), momentum=0.9)
    callbacks = [LearningRateWarmup(warmup_epochs=args.warmup_epochs), MetricAverage(), MetricsLogger("-")]
    if args.checkpoint_dir:
        callbacks.append(Checkpoint(args.checkpoint_dir, keep=2))
    trainer = hk.Trainer(model, optimizer, nn.CrossEntropyLoss(), callbacks=callbacks,
                         metrics={"accuracy": accuracy})
    history = hk.fit_elastic(trainer, train, epochs=args.epochs, batch_size=args.batch_size,
                             commit_every=args.commit_every)
    progress = history.elastic  # resets and recovery times
    val = trainer.evaluate(TensorDataset(torch.from_numpy(x_val), torch.from_numpy(y_val)), batch_size=256)
    if hk.rank() == 0:
        print(f"final validation accuracy: {val['accuracy']:.4f} after {progress.resets} reset(s); "
              f"recovery seconds: {[round(t, 2) for t in progress.recovery_seconds]}", flush=True)


if __name__ == "__main__":
    main()
