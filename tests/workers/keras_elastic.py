"""Elastic Keras 3 run for the integration tests (under horovodrun --min-np/--max-np), on the backend
KERAS_BACKEND names (TensorFlow when unset); the step records, injected failures and summary are
elastic_protocol.py's. The sample indices a step trained are read inside the train step from column 0 of x,
which the model does not learn from."""

import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np
from elastic_protocol import StepProtocol, digest, parse_args

import hvdkit.keras as hk

args = parse_args()
hk.init(threads=1)
import keras  # noqa: E402

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

from hvdkit.core import Callback  # noqa: E402
from hvdkit.keras.callbacks import (  # noqa: E402
    BroadcastInitialState,
    Checkpoint,
    LearningRateWarmup,
    MetricAverage,
)
from hvdkit.keras.engine_bridge import EngineBridge  # noqa: E402

LAST: list = [[]]


def _record(ids):
    LAST[0] = keras.ops.convert_to_numpy(ids).astype(int).tolist()
    return np.int32(0)


class Indexed(keras.layers.Layer):
    """Column 0 carries the sample index: recorded (in the train step), not learned from."""

    def call(self, inp):
        if keras.backend.backend() == "tensorflow":
            tf.py_function(_record, [inp[:, 0]], Tout=tf.int32)
        elif inp.device.type != "meta":  # torch runs the step eagerly ("meta": Keras inferring shapes)
            _record(inp[:, 0])
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

protocol = StepProtocol(args, hk.rank())


class Probe(keras.callbacks.Callback):
    """Not async-safe on purpose: runs right after each step, while LAST holds its samples."""

    began_from = None

    def on_train_batch_begin(self, batch, logs=None):
        self.began_from = digest(self.model.get_weights())

    def on_train_batch_end(self, batch, logs=None):
        s = self.model._hvdkit_engine.state
        protocol.step_done(s.global_step, s.epoch, s.batch, hk.size(), hk.rank(), s.ops.get_lr(), LAST[0],
                           self.began_from)


class ResetProbe(Callback):
    def on_reset(self, state):
        protocol.reset(state)


# BroadcastInitialState too: under fit_elastic it must not broadcast (a joiner would hang, horovod#2652).
cbs = [Probe(), EngineBridge(ResetProbe()), MetricAverage(), BroadcastInitialState()]
if args.warmup_epochs:
    cbs.append(LearningRateWarmup(warmup_epochs=args.warmup_epochs))
ckpt = Checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
if ckpt:
    cbs.append(ckpt)
model.build((None, 7))
t0 = time.monotonic()
hist = hk.fit_elastic(model, x, y, epochs=args.epochs, batch_size=args.batch, commit_every=args.commit_every,
                      seed=3, callbacks=cbs, verbose=0)
if hk.rank() == 0:
    protocol.summary(model._hvdkit_engine.state, hist.elastic, hist.epochs_run,
                     None if not ckpt or not ckpt.restored else ckpt.restored.epoch, hist.history, t0)
