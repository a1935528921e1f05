"""Keras 3 mixed precision under Horovod, 2 workers, on the Keras backend KERAS_BACKEND names. Prints one JSON
line per rank.

mixed_float16 runs (the optimizer given as a LossScaleOptimizer, and as a plain SGD under the global
policy) multiply rank 1's loss by inf at step 3 only. For each: the steps skipped (the inner optimizer's
iterations did not move), the loss scale before every step, a hash of the final weights.
A mixed_bfloat16 run: the loss per epoch.
"""

import hashlib
import json
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

hk.init(threads=1)
import keras  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState  # noqa: E402
from hvdkit.keras.mixed_precision import LossScaleOptimizer  # noqa: E402

RANK = hk.rank()
g = np.random.default_rng(7)
X = g.normal(size=(256, 8)).astype(np.float32)
Y = (X[:, :4].sum(1) > 0).astype(np.int64) + (X[:, 4] > 0.5).astype(np.int64)
XS, YS = hk.shard((X, Y))


class Probe(keras.callbacks.Callback):
    """Batch-begin only (Keras calls it synchronously): poisons rank 1's loss at step 3 and records the
    scale and the inner optimizer's step count each step starts from."""

    def __init__(self, poison):
        super().__init__()
        self.poison, self.scales, self.iterations = poison, [], []

    def on_train_batch_begin(self, batch, logs=None):
        opt = self.model.optimizer
        self.poison.assign(float("inf") if RANK == 1 and batch == 3 else 1.0)
        if opt.built:
            self.scales.append(float(keras.ops.convert_to_numpy(opt.dynamic_scale)))
            self.iterations.append(int(keras.ops.convert_to_numpy(opt.iterations)))


def build():
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(3),
                             keras.layers.Activation("linear", dtype="float32")])


def weights_hash(model):
    return hashlib.sha256(b"".join(np.asarray(w, np.float32).tobytes() for w in model.get_weights())).hexdigest()


def run_fp16(given):
    keras.mixed_precision.set_global_policy("mixed_float16")
    model = build()
    poison = keras.Variable(1.0, trainable=False, dtype="float32")
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(y, logits):
        return ce(y, logits) * poison

    sgd = keras.optimizers.SGD(0.1, momentum=0.9)
    opt = hk.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(sgd) if given == "lso" else sgd)
    assert isinstance(opt, LossScaleOptimizer), type(opt)
    model.compile(optimizer=opt, loss=loss, jit_compile=False)
    probe = Probe(poison)
    model.fit(XS, YS, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[BroadcastInitialState(), probe])
    its = [*probe.iterations, int(keras.ops.convert_to_numpy(opt.iterations))]
    skipped = [i for i in range(len(its) - 1) if its[i + 1] == its[i]]
    keras.mixed_precision.set_global_policy("float32")
    return {"skipped": skipped, "scales": probe.scales, "steps": len(its) - 1, "sha256": weights_hash(model),
            "finite": bool(all(np.isfinite(w).all() for w in model.get_weights()))}


def run_bf16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = build()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)), jit_compile=False,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(XS, YS, batch_size=16, epochs=4, shuffle=False, verbose=0, callbacks=[BroadcastInitialState()])
    keras.mixed_precision.set_global_policy("float32")
    return {"loss": hist.history["loss"], "sha256": weights_hash(model), "dtype": model.layers[0].compute_dtype}


def refused_plain_lso():
    """Keras's own LossScaleOptimizer around an hvdkit optimizer would hang on a one-rank overflow."""
    model = build()
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(hk.DistributedOptimizer(keras.optimizers.SGD(0.1))),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    try:
        model.fit(XS, YS, batch_size=8, epochs=1, verbose=0, callbacks=[BroadcastInitialState()])
    except ValueError as exc:
        return str(exc)
    return None


out = {"rank": RANK, "backend": keras.backend.backend(), "refused": refused_plain_lso(),
       "fp16_lso": run_fp16("lso"), "fp16_policy": run_fp16("policy"), "bf16": run_bf16()}
print("KERAS_PRECISION " + json.dumps(out), flush=True)
