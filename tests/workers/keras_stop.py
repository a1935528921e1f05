"""Keras fit under hvdkit: one rank's stop_training stops every rank, and an infinite dataset without
steps_per_epoch is refused before training. Prints ``RESULT {json}`` per rank."""

import json
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

hk.init(threads=1)
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState, MetricAverage  # noqa: E402

r = hk.rank()
keras.utils.set_random_seed(7)
out = {"rank": r}


def model():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    # warn: the NaN must reach TerminateOnNaN, whose stop is what these runs test
    m.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01), nonfinite="warn"), loss="mse")
    return m


class Batches(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(batch)

    def on_epoch_begin(self, epoch, logs=None):
        self.seen.append(f"epoch {epoch}")


class StopOnThisRank(keras.callbacks.Callback):  # an early stop decided on one rank's own numbers
    def on_epoch_end(self, epoch, logs=None):
        if r == 0 and epoch == 1:
            self.model.stop_training = True


x = np.ones((8, 4), np.float32)
y = np.zeros((8, 1), np.float32)
bad = x.copy()
if r == 1:
    bad[4:6] = np.nan  # batch 2 of every epoch on rank 1 only

# TerminateOnNaN after hvdkit's callbacks: rank 1 stops at batch 2, rank 0 sees a finite loss there
seen = Batches()
m = model()
m.fit(bad, y, batch_size=2, epochs=3, verbose=0, shuffle=False,
      callbacks=[BroadcastInitialState(), MetricAverage(), seen, keras.callbacks.TerminateOnNaN()])
out["nan"] = seen.seen
out["class_after"] = type(m).__module__ + "." + type(m).__qualname__
out["plain_class"] = type(m) is keras.Sequential

# a per-rank decision at epoch end, before hvdkit's callbacks in the list
seen = Batches()
model().fit(x, y, batch_size=2, epochs=4, verbose=0, shuffle=False,
            callbacks=[StopOnThisRank(), seen, BroadcastInitialState(), MetricAverage()])
out["early"] = [s for s in seen.seen if isinstance(s, str)]

# an infinite dataset and no steps_per_epoch: refused before the first step
seen = Batches()
forever = hk.shard(tf.data.Dataset.from_tensor_slices((x, y)).repeat()).batch(2)
try:
    model().fit(forever, epochs=1, verbose=0, callbacks=[seen, BroadcastInitialState()])
except ValueError as exc:
    out["infinite"] = str(exc)
out["infinite_steps"] = seen.seen
print("RESULT " + json.dumps(out), flush=True)
