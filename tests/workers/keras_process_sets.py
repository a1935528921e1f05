"""Keras 3 callbacks and optimizer honouring Horovod process sets (hybrid parallelism, #14 item 6).

Three ranks: the data-parallel set {0, 2} and rank 1 alone in {1}. Every rank draws different initial
weights and trains on different rows; ``BroadcastInitialState``, ``hk.DistributedOptimizer``,
``MetricAverage`` and ``Checkpoint`` are each given the rank's own set. Writes rank<r>.npz (final
weights), rank<r>_start.npz (weights at the first step) and rank<r>.json (raw and averaged epoch logs).
"""

import argparse
import json
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

p = argparse.ArgumentParser()
p.add_argument("--results", required=True)
p.add_argument("--checkpoint-dir", required=True)
args = p.parse_args()

sets = [hk.ProcessSet([0, 2]), hk.ProcessSet([1])]
hk.init(threads=1, process_sets=sets)
if hk.size() != 3:
    raise SystemExit(f"needs exactly 3 processes, got {hk.size()}")
import keras  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState, Checkpoint, MetricAverage  # noqa: E402

r = hk.rank()
mine = sets[0] if r in (0, 2) else sets[1]
name = "set02" if r in (0, 2) else "set1"
keras.utils.set_random_seed(1000 + r)  # different weights on every rank: only the set's broadcast aligns them
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(3)])
g = np.random.default_rng(7 + r)  # different rows on every rank
x = g.normal(size=(32, 6)).astype(np.float32)
y = ((x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 0.5).astype(np.int64))


class Probe(keras.callbacks.Callback):
    """First in the list: the raw epoch logs (before MetricAverage) and the weights of the first step."""

    def __init__(self):
        super().__init__()
        self.raw, self.start = [], None

    def on_train_batch_begin(self, batch, logs=None):
        if self.start is None:
            self.start = [w.copy() for w in self.model.get_weights()]

    def on_epoch_end(self, epoch, logs=None):
        self.raw.append({k: float(v) for k, v in logs.items()})


opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1), process_set=mine)
model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
probe = Probe()
cbs = [probe, BroadcastInitialState(process_set=mine), MetricAverage(process_set=mine),
       Checkpoint(os.path.join(args.checkpoint_dir, name), process_set=mine)]
hist = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, callbacks=cbs)
np.savez(f"{args.results}/rank{r}.npz", *model.get_weights())
np.savez(f"{args.results}/rank{r}_start.npz", *probe.start)
with open(f"{args.results}/rank{r}.json", "w") as f:
    json.dump({"raw": probe.raw, "history": hist.history}, f)
