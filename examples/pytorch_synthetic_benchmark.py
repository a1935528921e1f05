"""Synthetic-data training throughput with hvdkit + Horovod (samples/s per rank and in total).

    horovodrun -np 2 -H localhost:2 python examples/pytorch_synthetic_benchmark.py
    python examples/pytorch_synthetic_benchmark.py --json out.json      # one process, for scaling

A compute-bound MLP (default 512-1024-1024-10) on random data; warm-up steps are
not timed. Rank 0 prints per-rank and total samples/s, and ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

import hvdkit.torch as hk


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=256, help="per worker")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--inputs", type=int, default=512)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--fp16-allreduce", action="store_true")
    p.add_argument("--json", help="write the result here (rank 0)")
    args = p.parse_args()

    hk.init()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.inputs, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden),
                          nn.ReLU(), nn.Linear(args.hidden, 10))
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.01 * hk.size()),
                        compression="fp16" if args.fp16_allreduce else "none")
    x = torch.randn(args.batch_size, args.inputs)
    y = torch.randint(0, 10, (args.batch_size,))
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup_steps):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    elapsed = time.perf_counter() - t0
    per_rank = args.steps * args.batch_size / elapsed
    rates = hk.HorovodComm().allreduce_mean({"rate": per_rank})
    total = rates["rate"] * hk.size()
    if hk.rank() == 0:
        print(f"{hk.size()} process(es), threads/rank {torch.get_num_threads()}, batch {args.batch_size}/rank: "
              f"{rates['rate']:.0f} samples/s per rank, {total:.0f} samples/s total "
              f"({elapsed / args.steps * 1000:.1f} ms/step)", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"size": hk.size(), "per_rank": rates["rate"], "total": total,
                           "ms_per_step": elapsed / args.steps * 1000}, f)


if __name__ == "__main__":
    main()
