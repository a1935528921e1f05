"""What per-step timing costs, paired in one job: hvdkit's ``Trainer`` with and without ``StepTiming``.

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.step_timing_cost --results r.json

Two Trainers on copies of the same model and data, one with ``StepTiming(every=--every)`` and one without,
alternate epoch by epoch (ABBA order, so a drift cancels; the first ``--warmup`` rounds not timed). The
distributed optimizer's clock around its gradient wait runs in both (it is always on). Reported: ms/step
medians of each, the overhead per step in microseconds, and the median and quartiles of the time ratios
(on over off) per block of two rounds (``benchmarks.stats.block_ratios``).
"""

from __future__ import annotations

import argparse

from benchmarks.jobs import order
from benchmarks.workers.common import EpochTimer, check_warmup, median, paired_parser, paired_ratios, write_result


def parse_args() -> argparse.Namespace:
    """The model, the rounds, the untimed rounds and StepTiming's interval (checked before torch is imported)."""
    p = paired_parser(__doc__, rounds_help="epochs of each, the first --warmup not timed", warmup=2)
    p.add_argument("--every", type=int, default=20, help="StepTiming's interval in steps")
    return check_warmup(p, p.parse_args())


def main() -> None:
    """Alternate a Trainer with StepTiming and one without epoch by epoch in one job; write the timings."""
    args = parse_args()
    import torch
    from torch import nn

    import hvdkit.torch as hk
    from benchmarks.workers.train_torch import build, synthetic_data
    from hvdkit.callbacks import StepTiming

    hk.init()
    size = hk.size()
    data = synthetic_data(args, size)
    times: dict[str, list[float]] = {"on": [], "off": []}
    trainers = {}
    for key in times:
        model = build(args.inputs, args.hidden)
        extra = [StepTiming(every=args.every)] if key == "on" else []
        trainers[key] = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01 * size), nn.CrossEntropyLoss(),
                                   callbacks=[EpochTimer(times, key), *extra], progress=False)

    for r in range(args.rounds):
        for key in order(("on", "off"), r):
            trainers[key].fit(data, epochs=r + 1, batch_size=args.batch, seed=0)

    on, off = times["on"][args.warmup:], times["off"][args.warmup:]
    if hk.rank() == 0:
        write_result(args.results, {
            "size": size, "threads": torch.get_num_threads(), "batch_per_rank": args.batch, "steps": args.steps,
            "every": args.every,
            "ms_per_step": {"on": median(on) / args.steps * 1000, "off": median(off) / args.steps * 1000},
            "overhead_us_per_step": (median(on) - median(off)) / args.steps * 1e6,
            **paired_ratios(on, off), "warmup": args.warmup, "epoch_times": times})


if __name__ == "__main__":
    main()
