"""Digit classification with Keras 3 ``model.fit``, hvdkit's Keras callbacks and Horovod, offline.

    horovodrun -np 2 -H localhost:2 python examples/keras_mnist.py
    horovodrun -np 2 -H localhost:2 python examples/keras_mnist.py --checkpoint-dir /tmp/ckpt

Same data as ``pytorch_mnist.py`` (the 8x8 digits of ``data/digits.npz``, or ``--npz`` for a local MNIST).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _digits

import hvdkit.keras as hk
from hvdkit.keras.callbacks import (
    BroadcastInitialState,
    Checkpoint,
    LearningRateSchedule,
    LearningRateWarmup,
    MetricAverage,
    MetricsLogger,
)


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
    import keras

    keras.utils.set_random_seed(args.seed)
    x_tr, y_tr, x_val, y_val = _digits.load(args.npz, args.seed)
    n_classes = int(max(y_tr.max(), y_val.max())) + 1
    model = keras.Sequential([
        keras.Input((x_tr.shape[1],)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(n_classes),
    ])
    # Linear scaling rule: build the optimizer with the single-worker LR times the world size.
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(args.lr * hk.size(), momentum=0.9))
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])

    callbacks = [
        BroadcastInitialState(),  # every rank starts from rank 0's weights
        MetricAverage(),  # epoch metrics (and val_ metrics) averaged over workers
        LearningRateWarmup(warmup_epochs=args.warmup_epochs),
        MetricsLogger(args.metrics_file or "-"),
    ]
    if args.epochs > args.warmup_epochs:  # then cosine decay to the last epoch
        callbacks.append(LearningRateSchedule.cosine(end_epoch=args.epochs, start_epoch=args.warmup_epochs))
    initial_epoch = 0
    if args.checkpoint_dir:
        ckpt = Checkpoint(args.checkpoint_dir, keep=2)
        initial_epoch = ckpt.resume_epoch(model)
        callbacks.append(ckpt)

    x_shard, y_shard = hk.shard((x_tr, y_tr))
    xv_shard, yv_shard = hk.shard((x_val, y_val))
    history = model.fit(x_shard, y_shard, batch_size=args.batch_size, epochs=args.epochs,
                        initial_epoch=initial_epoch, validation_data=(xv_shard, yv_shard),
                        callbacks=callbacks, verbose=0)
    if hk.rank() == 0:
        print(f"final validation accuracy: {history.history['val_accuracy'][-1]:.4f}", flush=True)


if __name__ == "__main__":
    main()
