"""Writes the format-3 checkpoint folders in this directory with the hvdkit that wrote format 3 (895cb82).

    PYTHONPATH=<a checkout of 895cb82> python tests/checkpoint/data/make_format3.py tests/checkpoint/data

Two epochs of a tiny model each (one process): ``format3-torch`` (Adam, BatchNorm: integer-keyed optimizer
state, tuples, buffers), ``format3-keras`` (SGD with momentum). The last weights go beside them
(``*-final.npz``) so the tests can check a converted checkpoint holds exactly what was trained.
"""

import random
import sys
from pathlib import Path

import numpy as np

out = Path(sys.argv[1])
random.seed(0)
np.random.seed(0)

if "keras" not in sys.argv[2:]:
    import torch
    from torch.utils.data import TensorDataset

    import hvdkit.torch as hk
    from hvdkit.callbacks import Checkpoint

    hk.init(threads=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    trainer = hk.Trainer(model, torch.optim.Adam(model.parameters(), lr=0.01), torch.nn.CrossEntropyLoss(),
                         callbacks=[Checkpoint(out / "format3-torch", keep=2, async_save=False)])
    trainer.fit(data, epochs=2, batch_size=8, shuffle=False)
    np.savez(out / "format3-torch-final.npz", **{k: v.numpy() for k, v in model.state_dict().items()})

if "torch" not in sys.argv[2:]:
    import hvdkit.keras as hkk

    hkk.init(threads=1)
    import keras

    from hvdkit.keras.callbacks import Checkpoint as KerasCheckpoint

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=hkk.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), loss="mse")
    x, y = np.random.rand(16, 4).astype("float32"), np.random.rand(16, 2).astype("float32")
    model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0,
              callbacks=[KerasCheckpoint(out / "format3-keras", keep=2, async_save=False)])
    np.savez(out / "format3-keras-final.npz", *model.get_weights())
