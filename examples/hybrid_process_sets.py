"""Hybrid parallelism with Horovod process sets: 2 data-parallel replicas of a 2-stage pipeline.

    horovodrun -np 4 -H localhost:4 python examples/hybrid_process_sets.py --checkpoint-dir ckpt/

Four processes, CPU only. Rank r is stage ``r % 2`` of pipeline replica ``r // 2``:

    pipeline pairs (model parallelism)   {0, 1}  {2, 3}   activations forward, gradients back
    data-parallel sets (one per stage)   {0, 2}  {1, 3}   gradient allreduce, metrics, checkpoints

Stage 0 (``Linear + Tanh``) broadcasts its activations to stage 1 on the pair's process set;
stage 1 (``Linear``, the loss) broadcasts the gradient of the loss with respect to those
activations back. ``hk.distribute(..., process_set=dp_set)`` broadcasts each stage's initial
weights from the set's first rank and averages gradients over its data-parallel set only, so the two
copies of a stage start and stay identical (each rank draws different initial weights: only the
broadcast makes them equal). hvdkit's ``MetricAverage``
and ``Checkpoint`` take the stage's set: each stage averages its own metrics over its replicas and
writes its own folder (``ckpt/stage0``, ``ckpt/stage1``), and a rerun resumes both stages.
``--results DIR`` writes each rank's per-epoch metrics and weight hashes to ``DIR/rank<r>.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import horovod.torch as hvd
import torch
from torch import nn

import hvdkit.torch as hk
from hvdkit.callbacks import Checkpoint, MetricAverage
from hvdkit.core import Engine

HIDDEN, BATCH, ROWS = 32, 16, 256


def weights_hash(model: nn.Module) -> str:
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--checkpoint-dir", help="one sub-folder per stage; a rerun resumes from it")
    p.add_argument("--results", help="folder for rank<r>.json (per-epoch metrics and weight hashes)")
    args = p.parse_args()

    pairs = [hvd.ProcessSet([0, 1]), hvd.ProcessSet([2, 3])]
    stage_sets = [hvd.ProcessSet([0, 2]), hvd.ProcessSet([1, 3])]
    hk.init(threads=1, process_sets=pairs + stage_sets)  # every rank registers the same sets
    if hk.size() != 4:
        raise SystemExit(f"this example needs exactly 4 processes (horovodrun -np 4), got {hk.size()}")
    rank = hk.rank()
    stage, replica = rank % 2, rank // 2
    pair, dp_set = pairs[replica], stage_sets[stage]
    sender, receiver = pair.ranks  # global ranks of this replica's stage 0 and stage 1

    # Data: one synthetic problem; each replica trains on its half, both stages of a replica see the same rows.
    g = torch.Generator().manual_seed(0)
    x_all = torch.randn(ROWS, 8, generator=g)
    y_all = (x_all[:, :4].sum(1) > 0).long() + (x_all[:, 4] > 0.5).long()
    x, y = x_all[replica::2], y_all[replica::2]
    steps = len(x) // BATCH

    torch.manual_seed(100 + rank)  # different on every rank: distribute's broadcast makes replicas equal
    model = nn.Sequential(nn.Linear(8, HIDDEN), nn.Tanh()) if stage == 0 else nn.Sequential(nn.Linear(HIDDEN, 3))
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9), process_set=dp_set)
    callbacks: list = [MetricAverage(process_set=dp_set)]
    if args.checkpoint_dir:
        callbacks.append(Checkpoint(os.path.join(args.checkpoint_dir, f"stage{stage}"), process_set=dp_set))
    engine = Engine(hk.HorovodComm(), hk.TorchOps(model, opt), callbacks)
    ce = nn.CrossEntropyLoss()
    record: dict = {"rank": rank, "stage": stage, "replica": replica, "epochs": []}

    engine.train_begin(args.epochs, steps)  # Checkpoint resumes both stages here
    # Both stages must go on from the same epoch (a crash between the two stages' saves could leave
    # their folders one epoch apart): one allgather over all ranks, a ValueError naming each rank's epoch.
    engine.check_ranks_agree({"resumed epoch": engine.state.epoch})
    record["resumed_epoch"] = engine.state.epoch
    try:
        for epoch in range(engine.state.epoch, args.epochs):
            engine.epoch_begin(epoch)
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))  # same in a pair
            total = 0.0
            for i in range(steps):
                engine.batch_begin(i)
                idx = order[i * BATCH:(i + 1) * BATCH]
                opt.zero_grad()
                if stage == 0:
                    act = model(x[idx])
                    hvd.broadcast_(act.detach().clone(), root_rank=sender, name="act", process_set=pair)
                    grad = torch.empty_like(act)
                    hvd.broadcast_(grad, root_rank=receiver, name="grad", process_set=pair)
                    act.backward(grad)
                    value = float(act.detach().abs().mean())
                else:
                    act = torch.empty(len(idx), HIDDEN)
                    hvd.broadcast_(act, root_rank=sender, name="act", process_set=pair)
                    act.requires_grad_(True)
                    loss = ce(model(act), y[idx])
                    loss.backward()
                    assert act.grad is not None
                    hvd.broadcast_(act.grad, root_rank=receiver, name="grad", process_set=pair)
                    value = float(loss.detach())
                opt.step()  # gradients averaged over this stage's data-parallel set
                total += value
                engine.batch_end({"value": value})
            name = "act_abs_mean" if stage == 0 else "loss"  # the stages log different metrics
            local = total / steps
            logs = engine.epoch_end({name: local})  # MetricAverage: mean over this stage's replicas
            record["epochs"].append({"epoch": epoch + 1, "local": local, "averaged": logs[name],
                                     "sha256": weights_hash(model)})
            if rank in (0, 1):
                print(f"epoch {epoch + 1} stage {stage}: {name} {logs[name]:.4f}", flush=True)
    finally:
        engine.train_end()
    if args.results:
        os.makedirs(args.results, exist_ok=True)
        with open(os.path.join(args.results, f"rank{rank}.json"), "w") as f:
            json.dump(record, f)


if __name__ == "__main__":
    main()
