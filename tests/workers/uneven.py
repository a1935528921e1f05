"""Ranks with different data: each mode is one way a job used to wait forever (#13 item 1).

    torch-loader    each rank's own DataLoader: 51 batches on rank 0, 50 on rank 1
    torch-val-rank0 validation_data on rank 0 only
    keras-uneven    each rank's own rows for model.fit: 51 batches against 50
    keras-shard     hk.shard((x, y)) of 201 rows: equal counts, trains to the end
"""

import os
import sys

import numpy as np

mode = sys.argv[1]
rows = np.random.default_rng(0).normal(size=(201, 4)).astype(np.float32)
labels = (rows.sum(1) > 0).astype(np.int64)

if mode.startswith("torch"):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import hvdkit.torch as hk

    hk.init(threads=1)
    r = hk.rank()
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
print("FINISHED", flush=True)
