"""channels_last and channels_last_3d models through hvdkit, 2 workers; prints ``MEMFMT {json}`` per rank.

Each run builds the same conv net (2-D with hk.SyncBatchNorm, or 3-D) with different weights per rank,
takes one local Adam step per rank (different data, so the optimizer state differs too), then trains it
through ``hk.distribute`` (a hand loop, fp16 compression optional) or ``hk.Trainer``, in NCHW or in
channels_last. Printed per run: a hash of the final weights (row-major bytes), the weights themselves,
whether the parameters kept their memory format. Also: a checkpoint written by a channels_last run and
resumed, and the elastic state's sync of channels_last weights.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint
from hvdkit.torch.elastic_adapter import TorchElasticState

hk.init(threads=1)
RANK = hk.rank()
OUT = Path(sys.argv[1])
FORMATS = {"nchw": torch.contiguous_format, "cl": torch.channels_last, "cl3d": torch.channels_last_3d}

gen = torch.Generator().manual_seed(0)
X2, X3 = torch.randn(64, 3, 8, 8, generator=gen), torch.randn(64, 2, 4, 6, 6, generator=gen)
Y = torch.randint(0, 4, (64,), generator=gen)


def build(dims: int, fmt: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    if dims == 2:
        net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 6, 3),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 4))
        net = hk.convert_sync_batchnorm(net)
    else:
        net = nn.Sequential(nn.Conv3d(2, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(6, 4))
    return net.to(memory_format=FORMATS[fmt])


def inputs(dims: int, fmt: str) -> torch.Tensor:
    return (X2 if dims == 2 else X3).contiguous(memory_format=FORMATS[fmt])


def local_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    """One step on this rank alone (different data per rank): parameters and Adam state now differ."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.add_(RANK + 1)
    grads = torch.autograd.grad(nn.functional.cross_entropy(model(x[RANK::2][:8]), Y[RANK::2][:8]) * (RANK + 1),
                                list(model.parameters()))
    for p, g in zip(model.parameters(), grads):
        p.grad = g
    opt.step()
    opt.zero_grad()


def report(model: nn.Module, fmt: str) -> dict:
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    kept = all(p.is_contiguous(memory_format=FORMATS[fmt]) for p in model.parameters() if p.dim() in (4, 5))
    return {"sha256": hashlib.sha256(b"".join(v.numpy().tobytes() for v in sd.values())).hexdigest(),
            "weights": {k: v.flatten().tolist() for k, v in sd.items()}, "format_kept": kept}


def run(dims: int, fmt: str, via: str, compression: str = "none") -> dict:
    model = build(dims, fmt, seed=10 + RANK)
    x = inputs(dims, fmt)
    base = torch.optim.Adam(model.parameters(), lr=0.01)
    local_step(model, base, x)
    if via == "trainer":
        trainer = hk.Trainer(model, base, nn.CrossEntropyLoss())
        trainer.fit(TensorDataset(x, Y), epochs=2, batch_size=8, shuffle=False)
        return report(model, fmt)
    opt = hk.distribute(model, base, compression=compression)
    xs, ys = x[RANK::2], Y[RANK::2]
    for step in range(8):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xs[step * 4:(step + 1) * 4]), ys[step * 4:(step + 1) * 4]).backward()
        opt.step()
    return report(model, fmt)


def resume(fmt: str) -> dict:
    """Train 2 epochs with checkpoints, then a fresh model and optimizer resume to epoch 3; and the same
    3 epochs uninterrupted."""
    out = {}
    for name, stops in (("resumed", (2, 3)), ("uninterrupted", (3,))):
        folder = OUT / f"memfmt-ckpt-{fmt}-{name}"
        for epochs in stops:
            model = build(2, fmt, seed=10)
            trainer = hk.Trainer(model, torch.optim.Adam(model.parameters(), lr=0.01), nn.CrossEntropyLoss(),
                                 callbacks=[Checkpoint(str(folder))])
            trainer.fit(TensorDataset(inputs(2, fmt), Y), epochs=epochs, batch_size=8, shuffle=False)
        out[name] = report(model, fmt)
        out[name]["state_format_kept"] = all(
            v.is_contiguous(memory_format=FORMATS[fmt]) for p, s in trainer.optimizer.state.items() if p.dim() == 4
            for v in s.values() if v.dim() == 4)
    return out


class _Loop:  # what TorchElasticState needs from the elastic loop
    def snapshot(self) -> dict:
        return {}

    def apply(self, snapshot: dict) -> None:
        pass


def elastic_sync() -> dict:
    """The elastic state's sync (after a reset) puts rank 0's channels_last weights on every rank."""
    model = build(2, "cl", seed=10 + RANK)
    base = torch.optim.Adam(model.parameters(), lr=0.01)
    local_step(model, base, inputs(2, "cl"))
    TorchElasticState(model, base, _Loop()).sync()
    return report(model, "cl") | {"state_sha256": hashlib.sha256(b"".join(
        v.contiguous().numpy().tobytes() for s in base.state.values() for v in s.values())).hexdigest()}


out: dict = {"rank": RANK, "runs": {}}
for dims, fmt in ((2, "nchw"), (2, "cl"), (3, "nchw"), (3, "cl3d")):
    out["runs"][f"{dims}d/{fmt}/distribute"] = run(dims, fmt, "distribute")
for fmt in ("nchw", "cl"):
    out["runs"][f"2d/{fmt}/distribute-fp16"] = run(2, fmt, "distribute", compression="fp16")
    out["runs"][f"2d/{fmt}/trainer"] = run(2, fmt, "trainer")
out["resume"] = resume("cl")
out["elastic"] = elastic_sync()
print("MEMFMT " + json.dumps(out), flush=True)
