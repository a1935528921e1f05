"""Under horovodrun -np 2: a script written for ``horovod.tensorflow.keras``, with only its import changed to
``import hvdkit.keras as hvd``; it runs as it is on Keras's TensorFlow and torch backends (``KERAS_BACKEND``).

A ``Sequential`` without an input shape (built by its first step), different initial weights and data per
rank, ``hvd.DistributedOptimizer`` and Horovod's callbacks; then ``hvd.load_model`` of the saved model and
one more epoch. Each rank writes OUT/rank<r>.json: the LR of every batch, the history and the weights.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np

import hvdkit.keras as hvd  # was: import horovod.tensorflow.keras as hvd

out = Path(sys.argv[1])
hvd.init()
r = hvd.rank()
keras.utils.set_random_seed(10 + r)  # different initial weights on each rank: the broadcast must fix that
rng = np.random.default_rng(r)
x = rng.normal(size=(32, 4)).astype("float32")
y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32")).astype("float32")

model = keras.Sequential([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])  # no input shape
initial_lr = 0.01 * hvd.size()
opt = hvd.DistributedOptimizer(keras.optimizers.SGD(initial_lr, momentum=0.9), compression=hvd.Compression.fp16)
model.compile(optimizer=opt, loss="mse")


class RecordLr(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.lrs = []

    def on_train_batch_begin(self, batch, logs=None):
        self.lrs.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


record = RecordLr()
callbacks = [
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=initial_lr, warmup_epochs=2, verbose=1),
    hvd.callbacks.LearningRateScheduleCallback(initial_lr, multiplier=0.5, start_epoch=2, end_epoch=4),
    record,
]
hist = model.fit(x, y, batch_size=8, epochs=5, callbacks=callbacks, verbose=0)
res = {"backend": keras.backend.backend(), "lrs": record.lrs, "history": hist.history,
       "weights": [w.tolist() for w in model.get_weights()], "iterations": int(model.optimizer.iterations.numpy())}

# hvd.load_model: the saved model comes back with a distributed optimizer and its state
path = out / "model.keras"
if r == 0:
    model.save(path)
# a barrier (rank 0 has written the file), on a NumPy value as Horovod's Keras collectives take
res["mean_rank"] = float(hvd.allreduce(np.array([float(r)]), name="saved")[0])
loaded = hvd.load_model(path)
res["loaded_is_distributed"] = bool(getattr(loaded.optimizer, "_hvdkit_distributed", False))
res["loaded_iterations"] = int(loaded.optimizer.iterations.numpy())
res["loaded_lr"] = float(keras.ops.convert_to_numpy(loaded.optimizer.learning_rate))
loaded.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[hvd.callbacks.MetricAverageCallback()])
res["loaded_weights"] = [w.tolist() for w in loaded.get_weights()]
(out / f"rank{r}.json").write_text(json.dumps(res))
