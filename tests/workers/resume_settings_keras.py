"""A Keras checkpoint resumed with another LR and momentum in the code (Horovod size 1). Prints ``RESULT {json}``
per run: the LR and momentum trained with, and hvdkit's warnings."""

import json
import logging
import sys

import keras
import numpy as np

import hvdkit.keras as hk
from hvdkit.keras.callbacks import Checkpoint

hk.init()
warnings: list[str] = []
handler = logging.Handler()
handler.emit = lambda record: warnings.append(record.getMessage())
logging.getLogger("hvdkit").addHandler(handler)
rng = np.random.default_rng(0)
x, y = rng.normal(size=(32, 4)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")


def run(name, epochs, lr, momentum):
    warnings.clear()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=momentum)), loss="mse")
    ckpt = Checkpoint(sys.argv[1])
    model.fit(x, y, batch_size=8, epochs=epochs, initial_epoch=ckpt.resume_epoch(model), verbose=0, callbacks=[ckpt])
    opt = model.optimizer
    print("RESULT " + json.dumps({"name": name, "lr": float(opt.learning_rate), "momentum": opt.momentum,
                                  "warnings": list(warnings)}), flush=True)


run("first", 1, 0.1, 0.9)
run("other settings", 2, 0.4, 0.5)
