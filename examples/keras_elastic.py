"""Elastic digit classification with Keras 3: training that survives workers leaving and joining.

On one machine (two local "hosts", localhost and 127.0.0.1; edit the printed hosts file to
remove or add one while it runs, or kill a worker):

    hvdkit elastic-local --np 2 --min-np 1 -- python examples/keras_elastic.py --epochs 20
    KERAS_BACKEND=torch hvdkit elastic-local --np 2 --min-np 1 -- python examples/keras_elastic.py  # on PyTorch

On a cluster, with your own discovery script:

    horovodrun -np 4 --min-np 2 --max-np 8 --host-discovery-script ./discover.sh \\
        python examples/keras_elastic.py --checkpoint-dir /shared/ckpt

``hk.fit_elastic`` commits model, optimizer, counters, callback states and the data position in
memory every --commit-every steps and at each epoch end; a failed worker rolls the survivors back
to the last commit, the rest of the epoch is dealt out over the new set of workers, and the LR
follows the linear scaling rule. With --checkpoint-dir, a job killed as a whole resumes from the
newest valid checkpoint when started again.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _digits

import hvdkit.keras as hk
from hvdkit.keras.callbacks import Checkpoint, LearningRateWarmup, MetricAverage, MetricsLogger


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05, help="single-worker LR; scaled by the number of workers")
    p.add_argument("--warmup-epochs", type=float, default=1)
    p.add_argument("--commit-every", type=int, default=10, help="steps between in-memory commits")
    p.add_argument("--checkpoint-dir", help="resume a whole-job restart from here")
    p.add_argument("--precision", choices=["float32", "mixed_float16", "mixed_bfloat16"], default="float32",
                   help="Keras mixed-precision policy (mixed_float16: hk.DistributedOptimizer adds a loss scale "
                        "on which all ranks agree)")
    args = p.parse_args()

    hk.init()
    import keras

    keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(0)  # the same initial weights on every worker (the first sync also broadcasts)
    x_tr, y_tr, x_val, y_val = _digits.load()
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10, dtype="float32")])  # float32 logits under mixed precision
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(args.lr * hk.size(), momentum=0.9)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    callbacks = [LearningRateWarmup(warmup_epochs=args.warmup_epochs), MetricAverage(), MetricsLogger("-")]
    if args.checkpoint_dir:
        callbacks.append(Checkpoint(args.checkpoint_dir, keep=2))
    history = hk.fit_elastic(model, x_tr, y_tr, epochs=args.epochs, batch_size=args.batch_size,
                             commit_every=args.commit_every, callbacks=callbacks, verbose=0)
    progress = history.elastic  # resets and recovery times
    _, acc = model.evaluate(x_val, y_val, verbose=0)
    if hk.rank() == 0:
        print(f"final validation accuracy: {acc:.4f} after {progress.resets} reset(s); "
              f"recovery seconds: {[round(t, 2) for t in progress.recovery_seconds]}", flush=True)


if __name__ == "__main__":
    main()
