"""Elastic Keras 3 run for the integration tests (under horovodrun --min-np/--max-np).

Same protocol as torch_elastic.py: each rank appends one JSON line per step to
<results>/steps-rank<r>-pid<pid>.jsonl with the sample indices the step trained (read inside the
train step from column 0 of x, which the model does not learn from); rank 0 writes summary.json.
"""

import argparse
import json
import os
import signal
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

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
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from hvdkit.core import Callback  # noqa: E402
from hvdkit.keras.callbacks import Checkpoint, LearningRateWarmup, MetricAverage  # noqa: E402
from hvdkit.keras.callbacks.bridge import EngineBridge  # noqa: E402

LAST: list = [[]]


def _record(ids):
    LAST[0] = ids.numpy().astype(int).tolist()
    return np.int32(0)


class Indexed(keras.layers.Layer):
    """Column 0 carries the sample index: recorded (in the train step), not learned from."""

    def call(self, inp):
        tf.py_function(_record, [inp[:, 0]], Tout=tf.int32)
        return inp[:, 1:]


keras.utils.set_random_seed(1000)
model = keras.Sequential([keras.Input((7,)), Indexed(), keras.layers.Dense(16, activation="tanh"),
                          keras.layers.Dense(2)])
model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(args.lr * hk.size())),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
g = np.random.default_rng(1)
feats = g.normal(size=(args.samples, 6)).astype(np.float32)
x = np.concatenate([np.arange(args.samples, dtype=np.float32)[:, None], feats], 1)
y = (feats[:, :3].sum(1) > 0).astype(np.int64)

log = open(os.path.join(args.results, f"steps-rank{hk.rank()}-pid{os.getpid()}.jsonl"), "a", buffering=1)
events: dict = {}


class Probe(keras.callbacks.Callback):
    """Not async-safe on purpose: runs right after each step, while LAST holds its samples."""

    def on_train_batch_end(self, batch, logs=None):
        s = self.model._hvdkit_engine.state
        step, size, rank = s.global_step, hk.size(), hk.rank()
        rec = {"step": step, "epoch": s.epoch, "batch": s.batch, "size": size, "rank": rank,
               "lr": s.ops.get_lr(), "samples": LAST[0]}
        log.write(json.dumps(rec) + "\n")
        if step == args.kill_at_step and rank == 1 and size == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == 0 and step == args.remove_at_step and size == 2:
            with open(args.hosts_file, "w") as f:
                f.write("localhost:1\n")
            events["removed_at"] = step
            events["waiting_for"] = 1
        # As in torch_elastic.py: while a requested host change is pending, rank 0 slows its steps
        # (bounded by the steps left) so that the run does not end before Horovod's ~1 s poll sees it.
        if events.get("waiting_for") is not None:
            if size == events["waiting_for"] and not (args.add_back and size == 1):
                events["waiting_for"] = None
            else:
                time.sleep(0.05)


class ResetProbe(Callback):
    def on_reset(self, state):
        events.setdefault("resets", []).append({"size": state.comm.size, "step": state.global_step,
                                                "epoch": state.epoch, "batch": state.batch})
        if args.add_back and state.comm.rank == 0 and state.comm.size == 1:
            with open(args.hosts_file, "w") as f:
                f.write("localhost:1\n127.0.0.1:1\n")
            events["waiting_for"] = 2


cbs = [Probe(), EngineBridge(ResetProbe()), MetricAverage()]
if args.warmup_epochs:
    cbs.append(LearningRateWarmup(warmup_epochs=args.warmup_epochs))
ckpt = Checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
if ckpt:
    cbs.append(ckpt)
model.build((None, 7))
t0 = time.monotonic()
hist = hk.fit_elastic(model, x, y, epochs=args.epochs, batch_size=args.batch, commit_every=args.commit_every,
                      seed=3, callbacks=cbs, verbose=0)
engine = model._hvdkit_engine
if hk.rank() == 0:
    summary = {"epochs_run": len(hist.epoch), "final_epoch": engine.state.epoch, "size": hk.size(),
               "global_step": engine.state.global_step, "resets": engine.elastic.resets,
               "recovery_seconds": engine.elastic.recovery_seconds, "events": events,
               "history": hist.history,
               "resumed_from": None if not ckpt or not ckpt.checkpoint.restored else ckpt.checkpoint.restored.epoch,
               "wall_seconds": time.monotonic() - t0}
    with open(os.path.join(args.results, "summary.json"), "w") as f:
        json.dump(summary, f)
    print("recovery seconds:", summary["recovery_seconds"], flush=True)
