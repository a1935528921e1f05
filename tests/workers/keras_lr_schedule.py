"""Keras fit whose optimizer's learning rate is a Keras ``LearningRateSchedule``, 2 ranks: trains with hvdkit's
callbacks (ranks identical, the schedule still in charge), resumes from a checkpoint, and is refused with a
clear error when an hvdkit LR callback would set the LR. Prints ``RESULT {json}`` per rank and case."""

import hashlib
import json
import sys
import tempfile

import keras
import numpy as np

import hvdkit.keras as hk
from hvdkit.keras.callbacks import BroadcastInitialState, Checkpoint, LearningRateWarmup, MetricAverage

hk.init()
rank = hk.rank()
rng = np.random.default_rng(0)
x, y = hk.shard((rng.normal(size=(64, 4)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")))


def build():
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(schedule)), loss="mse")
    return model


def digest(model):
    return hashlib.sha256(b"".join(v.tobytes() for v in model.get_weights())).hexdigest()


def report(case, **fields):
    print("RESULT " + json.dumps({"case": case, "rank": rank, **fields}), flush=True)


folder = tempfile.mkdtemp() if rank == 0 else None
folder = hk.HorovodComm().broadcast_object(folder)
model = build()
model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[BroadcastInitialState(), MetricAverage(),
                                                               Checkpoint(folder)])
report("fit", weights=digest(model), lr=float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)))
resumed = build()
ckpt = Checkpoint(folder)
start = ckpt.resume_epoch(resumed)
resumed.fit(x, y, batch_size=8, epochs=3, initial_epoch=start, verbose=0, callbacks=[BroadcastInitialState(), ckpt])
model.fit(x, y, batch_size=8, epochs=3, initial_epoch=2, verbose=0, callbacks=[BroadcastInitialState()])
report("resume", start=start, same=digest(resumed) == digest(model))
try:
    build().fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[LearningRateWarmup(warmup_epochs=1)])
    report("warmup", error=None)
except TypeError as e:
    report("warmup", error=str(e))
sys.exit(0)
