"""One process (Horovod size 1) that trains a ~64 MB model and checkpoints every epoch in the background.

    python async_checkpoint.py FOLDER EPOCHS [sync]

Prints "epoch N saved-in-background" after each epoch's save was handed over, and at the end the
manifest of the last checkpoint and a digest of the weights (to compare with a blocking run).
"""

import hashlib
import sys

import torch
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint
from hvdkit.core import Callback

folder, epochs = sys.argv[1], int(sys.argv[2])
blocking = len(sys.argv) > 3 and sys.argv[3] == "sync"
hk.init(threads=1)
torch.manual_seed(0)
side = 4096  # 4096 x 4096 float32 = 64 MiB of weights (+ as much momentum)
model = torch.nn.Sequential(torch.nn.Linear(side, side, bias=False), torch.nn.Linear(side, 2))
data = TensorDataset(torch.randn(8, side), torch.randint(0, 2, (8,)))
ckpt = Checkpoint(folder, keep=2, resume=False, async_save=not blocking)


class Say(Callback):
    order = 100  # after the checkpoint's save

    def on_epoch_end(self, state):
        print(f"epoch {state.epoch} saved-in-background", flush=True)


trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                     torch.nn.CrossEntropyLoss(), callbacks=[ckpt, Say()])
trainer.fit(data, epochs=epochs, batch_size=4, shuffle=False)
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(f"last {ckpt.last_saved.payload} weights {digest[:16]}", flush=True)
