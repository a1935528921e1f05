"""On a GPU, 1 process: hvdkit's Trainer on CUDA in every precision, each with an async checkpoint of its
CUDA state restored into a fresh model, SyncBatchNorm, and fp16 gradient compression.

    horovodrun -np 1 -H localhost:1 --gloo python tests/workers/gpu_trainer.py OUT_DIR

Writes OUT_DIR/gpu_trainer.json and prints it; exits 1 when a check failed. (scripts/gpu-check.sh)
``GPU_CHECK_DEVICE=cpu`` runs the same checks on the CPU, to try the script on a machine without a GPU.
"""

import json
import os
import sys
import tempfile

import torch
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint

out = sys.argv[1]
hk.init()
dev = torch.device(os.environ.get("GPU_CHECK_DEVICE") or f"cuda:{hk.local_rank()}")
if dev.type == "cuda":
    torch.cuda.set_device(dev)
gen = torch.Generator().manual_seed(0)
X = torch.randn(4096, 64, generator=gen)
Y = (X[:, :8].sum(1) > 0).long() + (X[:, 8] > 0.5).long()
DATA = TensorDataset(X, Y)  # on the host: the Trainer moves each batch to the model's device


def build() -> torch.nn.Module:
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.BatchNorm1d(512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 3))
    return hk.convert_sync_batchnorm(net).to(dev)


def trainer(net: torch.nn.Module, precision: str, folder: str, resume: bool, compression: str = "none"):
    opt = hk.distribute(net, torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), compression=compression)
    ckpt = Checkpoint(folder, keep=2, resume=resume, async_save=True)
    return hk.Trainer(net, opt, torch.nn.CrossEntropyLoss(), precision=precision, callbacks=[ckpt]), ckpt


def state_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
res: dict = {"device": device_name, "torch": torch.__version__, "runs": {}}
for precision, compression in [("32", "none"), ("bf16", "none"), ("fp16", "none"), ("32", "fp16")]:
    name = precision if compression == "none" else f"{precision}+{compression}-compression"
    with tempfile.TemporaryDirectory() as folder:
        net = build()
        tr, ckpt = trainer(net, precision, folder, resume=False, compression=compression)
        hist = tr.fit(DATA, epochs=3, batch_size=128)
        losses = hist.history["loss"]
        params_cuda = all(p.device.type == dev.type for p in net.parameters())
        # A fresh model on the GPU, resumed from the last (async-written) checkpoint: equal to the trained one.
        fresh = build()
        tr2, ckpt2 = trainer(fresh, precision, folder, resume=True, compression=compression)
        tr2.fit(DATA, epochs=3, batch_size=128)
        run = {"loss_per_epoch": losses, "params_on_device": params_cuda,
               "restored_epoch": ckpt2.restored.epoch if ckpt2.restored else None,
               "restored_equals_trained": state_equal(net, fresh),
               "loss_scale": tr.precision.loss_scale, "skipped_steps": tr.precision.skipped_steps}
        run["ok"] = (losses[-1] < losses[0] and all(map(lambda v: v == v, losses)) and params_cuda
                     and run["restored_epoch"] == 3 and run["restored_equals_trained"])
        res["runs"][name] = run
res["ok"] = all(r["ok"] for r in res["runs"].values())
with open(f"{out}/gpu_trainer.json", "w") as f:
    json.dump(res, f, indent=2)
print(json.dumps(res))
sys.exit(0 if res["ok"] else 1)
