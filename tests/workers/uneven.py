"""Ranks with different data: each mode is one way a job used to wait forever (#13 item 1).

    torch-loader    each rank's own DataLoader: 51 batches on rank 0, 50 on rank 1
    torch-val-rank0 validation_data on rank 0 only
    keras-uneven    each rank's own rows for model.fit: 51 batches against 50
    keras-shard     hk.shard((x, y)) of 201 rows: equal counts, trains to the end

``uneven.py MODE [MODE ...]`` runs the modes (of one framework) one after the other in one job; each
rank prints what a mode raised and goes on, and the job exits 1 if any mode raised.
"""

import os
import sys

import numpy as np

modes = sys.argv[1:]
rows = np.random.default_rng(0).normal(size=(201, 4)).astype(np.float32)
labels = (rows.sum(1) > 0).astype(np.int64)

if modes[0].startswith("torch"):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import hvdkit.torch as hk

    hk.init(threads=1)
    r = hk.rank()

    def run(mode):
        model = torch.nn.Linear(4, 2)
        trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
        data = TensorDataset(torch.from_numpy(rows), torch.from_numpy(labels))
        if mode == "torch-loader":
            mine = TensorDataset(torch.from_numpy(rows[r::2]), torch.from_numpy(labels[r::2]))
            trainer.fit(DataLoader(mine, batch_size=2), epochs=2)
        else:
            trainer.fit(data, epochs=2, batch_size=8, validation_data=data if r == 0 else None)
else:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import hvdkit.keras as hk

    hk.init(threads=1)
    import keras

    from hvdkit.keras.callbacks import MetricAverage

    def run(mode):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if mode == "keras-uneven":
            x, y = rows[hk.rank()::2], labels[hk.rank()::2]
        else:
            x, y = hk.shard((rows, labels))
        hist = model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=[MetricAverage()])
        print(f"rank {hk.rank()}: trained {len(hist.history['loss'])} epochs on {len(x)} rows", flush=True)

raised = False
for mode in modes:
    try:
        run(mode)
    except Exception as exc:  # printed and counted: the test reads each mode's error on each rank
        print(f"rank {hk.rank()}: {mode} raised {type(exc).__name__}: {exc}", flush=True)
        raised = True
print("FINISHED", flush=True)
sys.exit(1 if raised else 0)
