"""TensorBoard scalars and Horovod's timeline from a 2-worker run (#14 item 5).

    python observability.py torch|keras LOG_DIR TIMELINE
"""

import os
import sys

import numpy as np

framework, log_dir, timeline = sys.argv[1:4]
rows = np.random.default_rng(0).normal(size=(128, 4)).astype(np.float32)
labels = (rows.sum(1) > 0).astype(np.int64)

if framework == "torch":
    import torch
    from torch.utils.data import TensorDataset

    import hvdkit.torch as hk
    from hvdkit.callbacks import LearningRateWarmup, MetricAverage, TensorBoard
    from hvdkit.torch.trainer import accuracy

    hk.init(threads=1, timeline=timeline)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                         metrics={"accuracy": accuracy},
                         callbacks=[LearningRateWarmup(warmup_epochs=1), MetricAverage(),
                                    TensorBoard(log_dir, batch_every=2)])
    trainer.fit(TensorDataset(torch.from_numpy(rows), torch.from_numpy(labels)), epochs=2, batch_size=8,
                validation_data=TensorDataset(torch.from_numpy(rows[:32]), torch.from_numpy(labels[:32])))
else:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import hvdkit.keras as hk

    hk.init(threads=1, timeline=timeline)
    import keras

    from hvdkit.keras.callbacks import LearningRateWarmup, MetricAverage, TensorBoard

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = hk.shard((rows, labels))
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, validation_data=(rows[:32], labels[:32]),
              callbacks=[LearningRateWarmup(warmup_epochs=1), MetricAverage(),
                         TensorBoard(log_dir, batch_every=2, batch_size=8)])
print(f"rank {hk.rank()} FINISHED", flush=True)
