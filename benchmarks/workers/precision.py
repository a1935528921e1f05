"""bf16 against fp32 in hvdkit's Trainer, paired in one job (same model, data, threads, runtime settings).

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.precision --results r.json

Two Trainers on copies of the benchmark MLP, ``precision="32"`` and ``precision="bf16"``, alternate
epoch by epoch (ABBA order, so a drift of the machine cancels; the first round is not timed).
Reported: ms/step and samples/s medians of each and the median of the per-round time ratios.
"""

from __future__ import annotations

import torch
from torch import nn

import hvdkit.torch as hk
from benchmarks.jobs import order
from benchmarks.workers.common import EpochTimer, median, paired_args, quartiles, write_result
from benchmarks.workers.train_torch import build, synthetic_data


def main() -> None:
    """Alternate fp32 and bf16 Trainers epoch by epoch in one job; write the timings."""
    args = paired_args(__doc__ or "")

    hk.init()
    size = hk.size()
    data = synthetic_data(args, size)
    times: dict[str, list[float]] = {"32": [], "bf16": []}

    trainers = {}
    for key in times:
        model = build(args.inputs, args.hidden)
        trainers[key] = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01 * size), nn.CrossEntropyLoss(),
                                   callbacks=[EpochTimer(times, key)], precision=key, progress=False)

    for r in range(args.rounds):
        for key in order(("32", "bf16"), r):
            trainers[key].fit(data, epochs=r + 1, batch_size=args.batch, seed=0)

    fp32, bf16 = times["32"][1:], times["bf16"][1:]
    ratios = [b / a for a, b in zip(fp32, bf16)]  # bf16 time / fp32 time per round
    if hk.rank() == 0:
        samples = args.batch * args.steps * size
        write_result(args.results, {
            "size": size, "threads": torch.get_num_threads(), "batch_per_rank": args.batch, "steps": args.steps,
            "ms_per_step": {"fp32": median(fp32) / args.steps * 1000, "bf16": median(bf16) / args.steps * 1000},
            "samples_per_s": {"fp32": samples / median(fp32), "bf16": samples / median(bf16)},
            "time_ratio_median": median(ratios), "time_ratio_quartiles": quartiles(ratios),
            "speedup_median": median([1 / r for r in ratios]), "epoch_times": times})


if __name__ == "__main__":
    main()
