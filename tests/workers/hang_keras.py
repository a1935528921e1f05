"""Real hangs in Keras ``fit`` at np=2, on the backend ``KERAS_BACKEND`` names; rank 1's dataset never returns a
read (one that never completes), while rank 0 goes on into the run:

    before_run   its first read, which Keras makes before it calls any callback: rank 1 has not begun the run,
                 so rank 0, waiting at the run's start, must name it as missing
    first_batch  its first read inside the run (the PyTorch backend reads a batch before the step begins):
                 rank 1 must say where it is (``GUILTY``)
"""

import os
import sys
import threading

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

hk.init(threads=1)
import keras  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState  # noqa: E402

case = sys.argv[1]
r = hk.rank()
keras.utils.set_random_seed(7)


class Began(keras.callbacks.Callback):
    run = False

    def on_train_begin(self, logs=None):
        Began.run = True


class Reads(keras.utils.PyDataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if r == 1 and i == 0 and (case == "before_run" or Began.run):
            threading.Event().wait()  # GUILTY: first_batch (never set)
        rng = np.random.default_rng(i)
        return rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=(4, 1)).astype("float32")


model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
print(f"rank {r}: fit on {keras.backend.backend()}", flush=True)
model.fit(Reads(), epochs=1, verbose=0, shuffle=False, callbacks=[BroadcastInitialState(), Began()])
print("not reached", flush=True)
