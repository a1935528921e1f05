"""Compute-bound PyTorch training throughput through one implementation, same model/data/loader.

    horovodrun -np N python -m benchmarks.workers.train_torch --impl hvdkit --results r.json
    horovodrun -np N python -m benchmarks.workers.train_torch --impl horovod --results r.json
    torchrun --nproc-per-node N -m benchmarks.workers.train_torch --impl ddp --results r.json

hvdkit: ``hvdkit.torch.init`` + ``Trainer.fit``. horovod: a hand-written loop on raw Horovod
(``hvd.init``, ``DistributedOptimizer``, broadcast) with Horovod's defaults. ddp:
``DistributedDataParallel`` (gloo). All use the same MLP, batch per rank, DataLoader over an
in-memory dataset with a DistributedSampler, and the same intra-op threads (cores / ranks, or
``HVDKIT_THREADS``).
Per-epoch wall times after the first (warm-up) epoch; reports the median.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from benchmarks.workers.common import median, model_arguments, timed_count, write_result
from hvdkit.runtime.tuning import threads_per_rank


def build(inputs: int, hidden: int) -> nn.Module:
    """The benchmark MLP, its optimizer and a synthetic batch."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def synthetic_data(args, size: int) -> TensorDataset:
    """``args.steps`` batches of ``args.batch`` per rank of seeded random 10-class data."""
    g = torch.Generator().manual_seed(1)
    n = args.batch * args.steps * size
    return TensorDataset(torch.randn(n, args.inputs, generator=g), torch.randint(0, 10, (n,), generator=g))


def plain_epoch(net: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module, loader: DataLoader,
                sampler: DistributedSampler, epoch: int) -> float:
    """One epoch of the loop a user writes without hvdkit; returns its wall time in seconds."""
    sampler.set_epoch(epoch)
    t0 = time.perf_counter()
    for x, y in loader:
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    loss.item()
    return time.perf_counter() - t0


def main() -> None:
    """Time PyTorch training steps with the chosen implementation; write the results."""
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True, choices=["hvdkit", "horovod", "ddp"])
    model_arguments(p, steps=30)
    p.add_argument("--epochs", type=timed_count, default=4, help="the first is not timed (at least 2)")
    p.add_argument("--compression", choices=["none", "fp16"], default="none", help="hvdkit only: gradient compression")
    args = p.parse_args()

    if args.impl == "hvdkit":
        import hvdkit.torch as hk

        hk.init()
        rank, size = hk.rank(), hk.size()
    elif args.impl == "horovod":
        import horovod.torch as hvd

        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        torch.set_num_threads(threads_per_rank(hvd.local_size()))
    else:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
        torch.set_num_threads(threads_per_rank(int(os.environ.get("LOCAL_WORLD_SIZE", size))))

    g = torch.Generator().manual_seed(1)
    n = args.batch * args.steps * size
    data = TensorDataset(torch.randn(n, args.inputs, generator=g), torch.randint(0, 10, (n,), generator=g))
    model = build(args.inputs, args.hidden)
    loss_fn = nn.CrossEntropyLoss()
    epoch_times: list[float] = []

    if args.impl == "hvdkit":
        from hvdkit.core import Callback

        class Timer(Callback):
            def on_epoch_begin(self, state):
                self.t0 = time.perf_counter()

            def on_epoch_end(self, state):
                epoch_times.append(time.perf_counter() - self.t0)

        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * size)
        if args.compression != "none":
            opt = hk.distribute(model, opt, compression=args.compression)
        trainer = hk.Trainer(model, opt, loss_fn, callbacks=[Timer()])
        trainer.fit(data, epochs=args.epochs, batch_size=args.batch, seed=0)
    else:
        sampler: DistributedSampler = DistributedSampler(data, num_replicas=size, rank=rank, shuffle=True, seed=0)
        loader = DataLoader(data, batch_size=args.batch, sampler=sampler)
        if args.impl == "horovod":
            opt = torch.optim.SGD(model.parameters(), lr=0.01 * size)
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            hvd.broadcast_optimizer_state(opt, root_rank=0)
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
            net = model
        else:
            net = nn.parallel.DistributedDataParallel(model)
            opt = torch.optim.SGD(net.parameters(), lr=0.01 * size)
        for epoch in range(args.epochs):
            epoch_times.append(plain_epoch(net, opt, loss_fn, loader, sampler, epoch))

    t = median(epoch_times[1:])
    if rank == 0:
        write_result(args.results, {
            "impl": args.impl, "compression": args.compression,
            "size": size, "threads": torch.get_num_threads(), "batch_per_rank": args.batch,
            "ms_per_step": t / args.steps * 1000, "samples_per_s": args.batch * args.steps * size / t,
            "epoch_times": epoch_times})
    if args.impl == "ddp":  # leave the process group before exit (see allreduce.py)
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
