"""Per-step timing and the straggler hint on 2 ranks.

    python step_timing.py torch|keras OUT timing|slow|even

``timing``: StepTiming(every=2) with MetricsLogger(batch_every=2) and TensorBoard(batch_every=2) writing into OUT
(metrics.jsonl, tb/). ``slow``: rank 1 sleeps 50 ms inside its loss every step (a slow host's work, not a
synchronisation); ``even``: the same run without the sleep. Each rank prints ``TIMING {json}``: the callback's
last figures, whether it warned, and hvdkit's warnings on that rank.
"""

import json
import logging
import os
import sys
import time

import numpy as np

framework, out, mode = sys.argv[1:4]
warnings: list[str] = []
handler = logging.Handler()
handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
logging.getLogger("hvdkit").addHandler(handler)
rows = np.random.default_rng(0).normal(size=(128, 4)).astype(np.float32)
labels = (rows.sum(1) > 0).astype(np.int64)
SLEEP = 0.05

if framework == "torch":
    import torch
    from torch.utils.data import TensorDataset

    import hvdkit.torch as hk
    from hvdkit.callbacks import MetricsLogger, StepTiming, TensorBoard

    hk.init(threads=1)
    torch.manual_seed(0)
    cross_entropy = torch.nn.CrossEntropyLoss()

    def loss_fn(outputs, targets):
        if mode == "slow" and hk.rank() == 1:
            time.sleep(SLEEP)
        return cross_entropy(outputs, targets)

    model = torch.nn.Linear(4, 2)
    if mode == "timing":  # 2 epochs of 8 steps (128 rows over 2 ranks, 8 per batch)
        timing = StepTiming(every=2)
        callbacks = [timing, MetricsLogger(os.path.join(out, "metrics.jsonl"), batch_every=2),
                     TensorBoard(os.path.join(out, "tb"), batch_every=2)]
        epochs, batch = 2, 8
    else:  # 32 steps, exchanges every 4: the window of 8 steps is full from the third on
        timing = StepTiming(every=4, straggler_steps=8)
        callbacks, epochs, batch = [timing], 1, 2
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn, callbacks=callbacks)
    trainer.fit(TensorDataset(torch.from_numpy(rows), torch.from_numpy(labels)), epochs=epochs, batch_size=batch,
                shuffle=False)
else:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import hvdkit.keras as hk

    hk.init(threads=1)
    import keras

    from hvdkit.keras.callbacks import MetricsLogger, StepTiming, TensorBoard

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timing = StepTiming(every=2, batch_size=8)
    x, y = hk.shard((rows, labels))
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False,
              callbacks=[timing, MetricsLogger(os.path.join(out, "metrics.jsonl"), batch_every=2),
                         TensorBoard(os.path.join(out, "tb"), batch_every=2, batch_size=8)])
print("TIMING " + json.dumps({"rank": hk.rank(), "latest": timing.latest, "warned": timing.warned,
                              "warnings": warnings, "ranks": timing.ranks}), flush=True)
