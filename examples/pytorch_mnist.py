"""Digit classification with hvdkit + Horovod, offline.

    horovodrun -np 2 -H localhost:2 python examples/pytorch_mnist.py
    horovodrun -np 2 -H localhost:2 python examples/pytorch_mnist.py --npz /data/mnist.npz --epochs 3

Default data: the 8x8 digits of ``examples/data/digits.npz`` (1,797 images,
no download). ``--npz`` points at a local MNIST ``.npz`` with
``x_train, y_train, x_test, y_test`` (the layout of ``keras.datasets.mnist``).
Rank 0 prints per-epoch loss/accuracy and the final validation accuracy.
"""

from __future__ import annotations

import argparse
import os
import time

import _digits
import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, LearningRateSchedule, LearningRateWarmup, MetricAverage, MetricsLogger
from hvdkit.torch.trainer import accuracy


def load_data(npz: str | None, seed: int) -> tuple[TensorDataset, TensorDataset, int, int]:
    x_tr, y_tr, x_te, y_te = _digits.load(npz, seed)
    n_classes = int(max(y_tr.max(), y_te.max())) + 1
    train = TensorDataset(torch.from_numpy(x_tr), torch.from_numpy(y_tr))
    val = TensorDataset(torch.from_numpy(x_te), torch.from_numpy(y_te))
    return train, val, x_tr.shape[1], n_classes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--npz", help="local MNIST .npz (x_train, y_train, x_test, y_test); default: data/digits.npz")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05, help="single-worker LR; scaled by the number of workers")
    p.add_argument("--warmup-epochs", type=float, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint-dir", help="write checkpoints here and resume from the newest valid one")
    p.add_argument("--metrics-file", help="CSV/JSONL file for per-epoch metrics")
    args = p.parse_args()

    hk.init()
    torch.manual_seed(args.seed)
    train, val, n_in, n_out = load_data(args.npz, args.seed)
    model = nn.Sequential(nn.Linear(n_in, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, n_out))
    # Linear scaling rule: the optimizer is built with the single-worker LR times the world size.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hk.size(), momentum=0.9)

    callbacks = [
        LearningRateWarmup(warmup_epochs=args.warmup_epochs),  # T/n -> T over the first epochs
        MetricAverage(),  # epoch metrics averaged over workers
        MetricsLogger("-"),  # rank 0 prints one line per epoch
    ]
    if args.epochs > args.warmup_epochs:  # then cosine decay to the last epoch
        callbacks.append(LearningRateSchedule.cosine(end_epoch=args.epochs, start_epoch=args.warmup_epochs))
    if args.checkpoint_dir:
        callbacks.append(Checkpoint(args.checkpoint_dir, keep=2))
    if args.metrics_file:
        callbacks.append(MetricsLogger(args.metrics_file))
    trainer = hk.Trainer(model, optimizer, nn.CrossEntropyLoss(), callbacks=callbacks,
                         metrics={"accuracy": accuracy})

    if hk.rank() == 0:
        print(f"training on {len(train)} samples, {hk.size()} workers x batch {args.batch_size}, "
              f"threads/rank {torch.get_num_threads()}, pid {os.getpid()}", flush=True)
    t0 = time.perf_counter()
    history = trainer.fit(train, epochs=args.epochs, batch_size=args.batch_size, validation_data=val, seed=args.seed)
    if hk.rank() == 0:
        print(f"final validation accuracy: {history['val_accuracy'][-1]:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
