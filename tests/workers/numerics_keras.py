"""Keras fit with a NaN sample weight on one rank at one step, under nonfinite="skip" and then the default
("stop"). Prints ``RESULT {json}`` per rank and run: the error, whether the weights are finite, and them."""

import hashlib
import json

import keras
import numpy as np

import hvdkit.keras as hk
from hvdkit.keras.callbacks import BroadcastInitialState

hk.init()
rank = hk.rank()
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 4)).astype("float32")
y = (x[:, 0] > 0).astype("float32")[:, None]
x, y = hk.shard((x, y))  # 32 rows per rank: 4 steps of 8 per epoch
w = np.ones(len(x), "float32")
if rank == 1:
    w[8] = np.nan  # rank 1, batch 1 of every epoch: steps 1, 5 and 9


def run(name, **kwargs):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1), **kwargs), loss="binary_crossentropy")
    error = None
    try:
        model.fit(x, y, sample_weight=w, batch_size=8, epochs=3, shuffle=False, verbose=0,
                  callbacks=[BroadcastInitialState()])
    except Exception as exc:  # reported, so the test can check every rank's message
        error = f"{type(exc).__name__}: {exc}"
        at = error.find("hvdkit NonFiniteError")
        error = error[at:at + 400] if at >= 0 else error[:400]  # one short line: horovodrun splits long ones
    weights = hashlib.sha256(b"".join(v.tobytes() for v in model.get_weights())).hexdigest()
    print("RESULT " + json.dumps({"name": name, "rank": rank, "error": error, "weights": weights,
                                  "finite": bool(all(np.isfinite(v).all() for v in model.get_weights()))}), flush=True)


run("skip", nonfinite="skip")
run("stop")
