"""Gradient compression and reduce ops through ``hk.distribute``, 2 workers.

For each (compression, op) in the runs below: train a small classifier for 30 steps on this rank's
shard, then print the loss before/after and a hash of the final weights (one JSON line per rank).
Bad values are refused with a ValueError before anything is broadcast.
"""

import hashlib
import json

import horovod.torch as hvd
import torch

import hvdkit.torch as hk

hk.init(threads=1)
RANK, SIZE = hk.rank(), hk.size()
RUNS = [("none", "average"), ("fp16", "average"), ("fp16", "sum"), ("none", "adasum"), ("fp16", "adasum")]

gen = torch.Generator().manual_seed(0)
X = torch.randn(512, 8, generator=gen)
Y = (X[:, :4].sum(1) > 0).long() + (X[:, 4] > 0.5).long()
XS, YS = X[RANK::SIZE], Y[RANK::SIZE]  # this rank's shard


def weights_hash(model):
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()


def run(compression, op):
    torch.manual_seed(1 + RANK)  # different initial weights per rank: distribute must broadcast rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    lr = 0.05 if op == "sum" else 0.1
    if compression == "horovod-fp16":  # the reference: Horovod's own fp16 compressor, same step otherwise
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                       named_parameters=model.named_parameters(), compression=hvd.Compression.fp16)
    else:
        opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=lr), compression=compression, op=op)
    buffers = set()  # the half buffers fp16 casts into, over all steps
    ce = torch.nn.CrossEntropyLoss()
    with torch.no_grad():
        first = float(ce(model(X), Y))
    for step in range(30):
        i = (step * 32) % len(XS)
        opt.zero_grad()
        ce(model(XS[i:i + 32]), YS[i:i + 32]).backward()
        opt.step()
        compressor = getattr(opt._compression, "inner", None)  # hk.distribute's, inside its RowMajor
        buffers.update(h.data_ptr() for free in getattr(compressor, "_free", {}).values() for h in free)
    with torch.no_grad():
        last = float(ce(model(X), Y))
    return {"loss_first": first, "loss_last": last, "sha256": weights_hash(model), "half_buffers": len(buffers),
            "finite": all(bool(torch.isfinite(p).all()) for p in model.parameters())}


def refused(**kwargs):
    model = torch.nn.Linear(2, 2)
    try:
        hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1), **kwargs)
    except ValueError as exc:
        return str(exc)
    return None


def trainer_adasum():
    """The Trainer with an optimizer ``distribute`` gave for Adasum: it trains (the same steps as the hand-written
    loop), and settings that need averaged gradients are refused naming them."""
    from torch.utils.data import TensorDataset

    torch.manual_seed(1 + RANK)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1), op="adasum")
    refused = {}
    for name, value in (("precision", "fp16"), ("clip_grad_norm", 1.0), ("nonfinite", "skip")):
        try:
            hk.Trainer(model, opt, torch.nn.CrossEntropyLoss(), **{name: value})
        except ValueError as exc:
            refused[name] = str(exc)
    ce = torch.nn.CrossEntropyLoss()
    with torch.no_grad():
        first = float(ce(model(X), Y))
    hk.Trainer(model, opt, ce).fit(TensorDataset(XS[:256], YS[:256]), epochs=1, batch_size=32, shuffle=False)
    with torch.no_grad():
        last = float(ce(model(X), Y))
    return {"loss_first": first, "loss_last": last, "sha256": weights_hash(model), "refused": refused}


out = {"rank": RANK, "runs": {f"{c}/{o}": run(c, o) for c, o in RUNS}, "trainer_adasum": trainer_adasum(),
       "horovod_fp16": run("horovod-fp16", "average"),
       "bad_compression": refused(compression="int8"), "bad_op": refused(op="max")}
print("COMPRESSION " + json.dumps(out), flush=True)
