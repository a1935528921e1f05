"""One vocabulary and the evaluation events, under real Horovod (2 ranks).

    torch  Trainer.fit(validation_data=...) and the deprecated spellings (val_data, backward_passes_per_step,
           drop_remainder, EvalShardSampler)
    keras  model.fit(validation_data=...) with hvdkit's explicit Keras callback classes and a user's core
           callback through EngineBridge, plus Horovod's hvd.callbacks names

Each rank prints ``VOCAB {json}``: the events a recording callback saw, the logs at on_eval_end, the
history, the DeprecationWarnings raised.
"""

import json
import os
import sys
import warnings

import numpy as np

from hvdkit.core import Callback

mode = sys.argv[1]
rows = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
labels = (rows.sum(1) > 0).astype(np.int64)


class Recorder(Callback):
    order = 60  # after MetricAverage (50): sees the averaged epoch logs

    def __init__(self):
        self.events, self.eval_logs, self.closed = [], [], 0

    def on_epoch_begin(self, state):
        self.events.append("epoch_begin")

    def on_eval_begin(self, state):
        self.events.append("eval_begin")

    def on_eval_end(self, state):
        self.events.append("eval_end")
        self.eval_logs.append({k: float(v) for k, v in state.logs.items() if k.startswith("val_")})

    def on_epoch_end(self, state):
        self.events.append("epoch_end")

    def close(self):
        self.closed += 1


rec = Recorder()
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", DeprecationWarning)
    if mode == "torch":
        import torch
        from torch.utils.data import TensorDataset

        import hvdkit.torch as hk
        from hvdkit.callbacks import MetricAverage

        hk.init(threads=1)
        torch.manual_seed(0)
        data = TensorDataset(torch.from_numpy(rows), torch.from_numpy(labels))
        val = TensorDataset(torch.from_numpy(rows[:20]), torch.from_numpy(labels[:20]))
        model = torch.nn.Linear(4, 2)
        trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                             callbacks=[MetricAverage(), rec])
        hist = trainer.fit(data, epochs=2, batch_size=8, validation_data=val)
        out["history"] = hist.history
        out["evaluate"] = trainer.evaluate(val, batch_size=8)
        # the old spellings still work, each with one warning
        model2 = torch.nn.Linear(4, 2)
        trainer2 = hk.Trainer(model2, hk.distribute(model2, torch.optim.SGD(model2.parameters(), lr=0.1),
                                                    backward_passes_per_step=2),
                              torch.nn.CrossEntropyLoss(), accumulate_steps=2)
        old = trainer2.fit(data, epochs=1, batch_size=8, val_data=val)
        out["old_history_keys"] = sorted(old.history)
        out["shard_old"] = hk.shard(np.arange(5), rank=1, size=2, drop_remainder=True).tolist()
        out["shard_new"] = hk.shard(np.arange(5), rank=1, size=2, drop_last=True).tolist()
        out["rank"] = hk.rank()
        out["eval_sampler"] = [list(hk.shard_sampler(val, for_eval=True)), list(hk.EvalShardSampler(val))]
    else:
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
        import keras

        import hvdkit.keras as hvd
        from hvdkit.keras.callbacks import LearningRateSchedule, MetricAverage
        from hvdkit.keras.engine_bridge import EngineBridge

        hvd.init(threads=1)
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), accumulate_steps=1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        x, y = hvd.shard((rows, labels))
        sched = LearningRateSchedule.cosine(4)
        hist = model.fit(x, y, epochs=2, batch_size=8, verbose=0, validation_data=(rows[:20], labels[:20]),
                         callbacks=[MetricAverage(), sched, EngineBridge(rec),
                                    hvd.callbacks.MetricAverageCallback()])
        out["history"] = {k: [float(v) for v in vs] for k, vs in hist.history.items()}
        out["schedule_class"] = type(sched).__qualname__
out["events"] = rec.events
out["eval_logs"] = rec.eval_logs
out["closed"] = rec.closed
out["deprecations"] = sorted(str(w.message).split(" is deprecated")[0] for w in caught
                             if " is deprecated: use " in str(w.message))
print("VOCAB " + json.dumps(out), flush=True)
