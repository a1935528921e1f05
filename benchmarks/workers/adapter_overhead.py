"""Adapter overhead, paired in one process: hvdkit's ``Trainer`` vs a hand-written raw-Horovod loop.

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.adapter_overhead --results r.json

Timing two separate jobs cannot resolve a 2 % difference on this kind of machine: whole jobs
run in a fast or a slow mode (docs/benchmarks.md, "timing modes"), raw Horovod included. So
both run in the same processes, on two copies of the same model with the same data, loader,
threads and runtime settings, alternating epoch by epoch (ABBA order, so a drift cancels; the first
``--warmup`` rounds, one in each order by default, not timed).
Reported: ms/step medians of each, the per-round ratios, and the median and quartiles of the ratios
per block of two rounds (``benchmarks.stats.block_ratios``).
"""

from __future__ import annotations

import argparse

from benchmarks.jobs import order
from benchmarks.workers.common import EpochTimer, check_warmup, median, paired_parser, paired_ratios, write_result


def parse_args() -> argparse.Namespace:
    """The model, the rounds and the untimed rounds at the start (checked before torch is imported)."""
    p = paired_parser(__doc__, rounds_help="epochs of each, the first --warmup not timed", warmup=2)
    return check_warmup(p, p.parse_args())


def main() -> None:
    """Alternate the hvdkit Trainer and a raw Horovod loop epoch by epoch in one job; write the timings."""
    args = parse_args()
    import horovod.torch as hvd
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    import hvdkit.torch as hk
    from benchmarks.workers.train_torch import build, plain_epoch, synthetic_data

    hk.init()
    rank, size = hk.rank(), hk.size()
    data = synthetic_data(args, size)
    loss_fn = nn.CrossEntropyLoss()

    # A: hvdkit's Trainer (its distribute() wraps the optimizer; sums stay on the device).
    times: dict[str, list[float]] = {"hvdkit": [], "horovod": []}

    model_a = build(args.inputs, args.hidden)
    trainer = hk.Trainer(model_a, torch.optim.SGD(model_a.parameters(), lr=0.01 * size), loss_fn,
                         callbacks=[EpochTimer(times, "hvdkit")])

    # B: the loop a user writes on raw Horovod.
    model_b = build(args.inputs, args.hidden)
    opt_b = torch.optim.SGD(model_b.parameters(), lr=0.01 * size)
    hvd.broadcast_parameters(model_b.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt_b, root_rank=0)
    opt_b = hvd.DistributedOptimizer(opt_b, named_parameters=[(f"raw.{k}", v) for k, v in model_b.named_parameters()])
    sampler: DistributedSampler = DistributedSampler(data, num_replicas=size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler)

    def raw_epoch(epoch: int) -> None:
        times["horovod"].append(plain_epoch(model_b, opt_b, loss_fn, loader, sampler, epoch))

    def hvdkit_epoch(epoch: int) -> None:
        trainer.fit(data, epochs=epoch + 1, batch_size=args.batch, seed=0)

    for r in range(args.rounds):
        for fn in order((hvdkit_epoch, raw_epoch), r):
            fn(r)

    a, b = times["hvdkit"][args.warmup:], times["horovod"][args.warmup:]
    if rank == 0:
        write_result(args.results, {
            "size": size, "threads": torch.get_num_threads(), "batch_per_rank": args.batch, "steps": args.steps,
            "ms_per_step": {"hvdkit": median(a) / args.steps * 1000, "horovod": median(b) / args.steps * 1000},
            "overhead_us_per_step": (median(a) - median(b)) / args.steps * 1e6,
            **paired_ratios(a, b), "warmup": args.warmup, "epoch_times": times})


if __name__ == "__main__":
    main()
