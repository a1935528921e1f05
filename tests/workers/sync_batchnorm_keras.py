"""hvdkit.keras.SyncBatchNormalization across workers, on Keras's TensorFlow or torch backend (argument 1,
TensorFlow by default): each of N workers holds batch b of a global batch N*b; the reference is Keras's
BatchNormalization on the whole batch in one process (computed on every rank). Eager calls, with and without a
mask, and on TensorFlow a tf.function (graph) call too. Prints one JSON line per rank."""

import hashlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = sys.argv[1] if len(sys.argv) > 1 else "tensorflow"

import numpy as np

import hvdkit.keras as hk

hk.init(threads=1)
import keras  # noqa: E402

from hvdkit.keras.backend import current  # noqa: E402
from hvdkit.keras.callbacks import BroadcastInitialState  # noqa: E402

hvd = current.hvd  # horovod.tensorflow or horovod.torch
BACKEND = keras.backend.backend()
R, N = hk.rank(), hk.size()
B = 8  # per worker
g = np.random.default_rng(0)
X = (g.normal(size=(N * B, 5, 5, 4)) * 3 + 1.5).astype(np.float32)  # channels last, means away from 0
W = g.normal(size=(N * B, 5, 5, 4)).astype(np.float32)
MASK = g.random(size=(N * B, 5, 5)) > 0.3  # a mask drops ~30% of the positions
part = slice(R * B, (R + 1) * B)


def make(cls):
    layer = cls(momentum=0.7, gamma_initializer=keras.initializers.RandomUniform(0.5, 1.5, seed=1),
                beta_initializer=keras.initializers.RandomUniform(-0.5, 0.5, seed=2))
    layer.build((None, 5, 5, 4))
    return layer


def step_tf(layer, x, w, scale, mask=None):
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = layer(x, training=True, mask=mask)
        loss = tf.reduce_sum(out * w) / scale
    return out, tape.gradient(loss, [x, layer.gamma, layer.beta])


def step_torch(layer, x, w, scale, mask=None):
    import torch

    x = torch.tensor(x, requires_grad=True)
    out = layer(x, training=True, mask=mask)
    loss = (out * torch.tensor(w)).sum() / scale
    return out, torch.autograd.grad(loss, [x, layer.gamma.value, layer.beta.value])


def err(a, b):
    return float(np.max(np.abs(keras.ops.convert_to_numpy(a) - keras.ops.convert_to_numpy(b))))


def graph(fn):
    import tensorflow as tf

    return tf.function(fn)


step = step_tf if BACKEND == "tensorflow" else step_torch
modes = {"eager": step, "masked": step} | ({"graph": graph(step)} if BACKEND == "tensorflow" else {})
errors = {}
for mode, run in modes.items():
    ref, sync = make(keras.layers.BatchNormalization), make(hk.SyncBatchNormalization)
    mask, my_mask = (MASK, MASK[part]) if mode == "masked" else (None, None)
    out_ref, (gx_ref, gg_ref, gb_ref) = run(ref, X, W, float(N * B), mask)  # mean over the global batch
    out, (gx, gg, gb) = run(sync, X[part], W[part], float(B), my_mask)  # each worker's mean
    gg, gb = (hvd.allreduce(t, op=hvd.Average, name=f"test.{mode}.{k}") for k, t in enumerate((gg, gb)))
    errors[mode] = {
        "output": err(out, keras.ops.convert_to_numpy(out_ref)[part]),
        "moving_mean": err(sync.moving_mean, ref.moving_mean),
        "moving_variance": err(sync.moving_variance, ref.moving_variance),
        "grad_gamma": err(gg, gg_ref), "grad_beta": err(gb, gb_ref),
        "grad_input": err(keras.ops.convert_to_numpy(gx) / N, keras.ops.convert_to_numpy(gx_ref)[part]),
        "inference": err(sync(X[part], training=False), ref(X[part], training=False)),
    }
    if mode == "eager":
        local_gap = err(make(keras.layers.BatchNormalization)(X[part], training=True),
                        keras.ops.convert_to_numpy(out_ref)[part])

# In a model trained by model.fit: replicas (weights and moving statistics) stay identical.
keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input((5, 5, 4)), keras.layers.Conv2D(6, 3), hk.SyncBatchNormalization(),
                          keras.layers.ReLU(), keras.layers.Flatten(), keras.layers.Dense(3)])
y = g.integers(0, 3, size=128)
x = (g.normal(size=(128, 5, 5, 4)) + y[:, None, None, None]).astype(np.float32)
xs, ys = hk.shard((x, y))
model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), jit_compile=False,
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
hist = model.fit(xs, ys, batch_size=16, epochs=3, shuffle=False, verbose=0, callbacks=[BroadcastInitialState()])
state = b"".join(np.asarray(w, np.float32).tobytes() for w in model.get_weights())
restored = keras.Sequential.from_config(model.get_config())  # the layer serialises and comes back
print("KERAS_SYNCBN " + json.dumps({
    "rank": R, "backend": BACKEND, "errors": errors, "local_gap": local_gap, "loss": hist.history["loss"],
    "restored_layer": type(restored.layers[1]).__name__, "sha256": hashlib.sha256(state).hexdigest()}), flush=True)
