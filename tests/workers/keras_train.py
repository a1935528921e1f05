"""A small deterministic Keras 3 run for the integration tests: model.fit, a custom tape loop, or both
one after the other in one process (each from a freshly seeded model: one launch for two checks). ``fit`` runs on
either Keras backend (``KERAS_BACKEND=tensorflow`` or ``torch``); ``tape`` on TensorFlow.

Writes per mode and rank, in <results>/<mode>/: rank<r>.npz (final weights), rank<r>_init.npz (as built),
rank<r>_start.npz (weights when the first step starts) and rank<r>.json (LRs per step, raw and averaged logs,
the Horovod controller the run used: "mpi" or "gloo").
"""

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

p = argparse.ArgumentParser()
p.add_argument("--results", required=True)
p.add_argument("--mode", choices=["fit", "fit_acc", "fit_fp16", "tape"], nargs="+", default=["fit"],
               help="fit_acc: accumulate_steps=2 (averaged); fit_fp16: fp16 compression")
p.add_argument("--batch", type=int, default=8, help="per worker")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--momentum", type=float, default=0.0)
p.add_argument("--warmup-epochs", type=float, default=0.0)
p.add_argument("--checkpoint-dir")
p.add_argument("--shuffle", action="store_true", help="fit(shuffle=True): a resume must draw the same order")
p.add_argument("--model-seed-per-rank", action="store_true")
p.add_argument("--wait-at-step", type=int,
               help="fit: before this step (counted in this process), once the checkpoints written so far are "
                    "durable, write <results>/waiting.<rank> and wait (up to 120 s) for a stop signal to end it")
p.add_argument("--jit-probe", action="store_true",
               help="after the run, fit a fresh jit_compile=True model once and record its error in rank<r>_jit.json")
args = p.parse_args()

hk.init(threads=1)
import keras  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState, Checkpoint, LearningRateWarmup, MetricAverage  # noqa: E402

r = hk.rank()
# Horovod's names, on either backend: the controller that carries this run's collectives
controller = "gloo" if hk.gloo_enabled() else "mpi" if hk.mpi_enabled() else None
g = np.random.default_rng(7)
x = g.normal(size=(64, 6)).astype(np.float32)
y = ((x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 0.5).astype(np.int64))
xs, ys = hk.shard((x, y))
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


class RawLogs(keras.callbacks.Callback):
    """Placed first: sees the raw (per-rank) epoch logs, before MetricAverage averages them."""

    def __init__(self):
        super().__init__()
        self.raw = []

    def on_epoch_end(self, epoch, logs=None):
        self.raw.append({k: float(v) for k, v in logs.items()})


class StepProbe(keras.callbacks.Callback):
    """Placed after the hvdkit callbacks: the LR each step will use and the weights the first step
    starts from. Only batch-begin hooks, so Keras keeps dispatching batch ends asynchronously (the
    mode hvdkit's callbacks run in)."""

    def __init__(self):
        super().__init__()
        self.start, self.lrs, self.step = None, [], 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.start is None:
            self.start = [w.copy() for w in self.model.get_weights()]
        self.lrs.append([self.step, float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))])
        self.step += 1


class WaitForSignal(keras.callbacks.Callback):
    """--wait-at-step: the test signals the run while every rank is surely mid-epoch, after the last epoch's
    checkpoint is on disk (what a signal must leave whole)."""

    def __init__(self, ckpt):
        super().__init__()
        self.ckpt, self.step = ckpt, 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.step == args.wait_at_step:
            self.ckpt.core.wait()
            (Path(args.results) / f"waiting.{r}").write_text(str(os.getpid()))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                time.sleep(0.05)
        self.step += 1


def train(mode):
    keras.utils.set_random_seed(1000 + (r if args.model_seed_per_rank else 0))
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(3)])
    initial = [w.copy() for w in model.get_weights()]
    out = {"size": hk.size(), "backend": keras.backend.backend(), "controller": controller}
    if mode.startswith("fit"):
        variant = {"fit": {}, "fit_acc": {"accumulate_steps": 2, "average_aggregated_gradients": True},
                   "fit_fp16": {"compression": "fp16"}}[mode]
        opt = hk.DistributedOptimizer(keras.optimizers.SGD(args.lr, momentum=args.momentum), **variant)
        model.compile(optimizer=opt, loss=loss_fn, metrics=["accuracy"], jit_compile=False)
        cap, start = RawLogs(), StepProbe()
        cbs = [cap, BroadcastInitialState(), MetricAverage()]
        if args.warmup_epochs:
            cbs.append(LearningRateWarmup(warmup_epochs=args.warmup_epochs))
        initial_epoch = 0
        if args.checkpoint_dir:
            ckpt = Checkpoint(args.checkpoint_dir)
            initial_epoch = ckpt.resume_epoch(model)
            cbs.append(ckpt)
            if args.wait_at_step is not None:
                cbs.append(WaitForSignal(ckpt))
        cbs.append(start)
        hist = model.fit(xs, ys, batch_size=args.batch, epochs=args.epochs, shuffle=args.shuffle, verbose=0,
                         callbacks=cbs, initial_epoch=initial_epoch)
        out.update(history=hist.history, raw=cap.raw, lrs=start.lrs, initial_epoch=initial_epoch,
                   steps=hist.params["steps"], updates=int(keras.ops.convert_to_numpy(opt.iterations)))
        start_weights = start.start
    else:  # a TensorFlow custom loop (KERAS_BACKEND=tensorflow only)
        import tensorflow as tf

        import hvdkit.tensorflow as htf

        opt = keras.optimizers.SGD(args.lr)
        opt.build(model.trainable_variables)
        htf.broadcast_variables(model.variables + opt.variables, root_rank=0)
        start_weights = [w.copy() for w in model.get_weights()]
        ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(args.batch)

        @tf.function
        def train_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = htf.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        for _ in range(args.epochs):
            for xb, yb in ds:
                train_step(xb, yb)

    results = os.path.join(args.results, mode)
    os.makedirs(results, exist_ok=True)
    np.savez(f"{results}/rank{r}.npz", *model.get_weights())
    np.savez(f"{results}/rank{r}_init.npz", *initial)
    np.savez(f"{results}/rank{r}_start.npz", *start_weights)
    with open(f"{results}/rank{r}.json", "w") as f:
        json.dump(out, f)


for mode in args.mode:
    train(mode)

if args.jit_probe:
    # After everything above is written, so the probe cannot change the run's results: lets a test check
    # the XLA refusal without a launch of its own.
    probe = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
    probe.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss=loss_fn, jit_compile=True)
    try:
        probe.fit(xs, ys, batch_size=args.batch, epochs=1, verbose=0)
        error = None
    except Exception as exc:  # any error is recorded; the test names the one it expects
        error = f"{type(exc).__name__}: {exc}"
    with open(f"{args.results}/rank{r}_jit.json", "w") as f:
        json.dump({"error": error}, f)
