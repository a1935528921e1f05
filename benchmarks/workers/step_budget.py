"""Where a training step's time goes: the budget behind the scaling efficiency.

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.step_budget --results r.json
    mpirun -np 2 --bind-to none python -m benchmarks.workers.step_budget --impl local --results r.json

The compute-bound model of ``train_torch`` (same MLP, batch per rank, DataLoader over an in-memory
dataset with a DistributedSampler), trained by a loop that times each phase of every step:

- ``data``: the next batch from the DataLoader;
- ``forward_backward``: forward, loss and backward. With ``--impl hvdkit`` the gradient allreduces
  start inside backward (Horovod's hooks hand each gradient to its background thread), so any
  communication that overlaps backward, or any core time the background thread takes from it, shows here;
- ``wait``: ``optimizer.synchronize()``, the allreduce time that did not overlap backward (with two
  ranks, also the time one waits for the slower one);
- ``update``: the SGD update (under ``skip_synchronize``).

``--impl local`` runs the same loop with no Horovod and no communication, each process on its own
shard (the launcher only starts the copies): ``mpirun -np 2`` of it measures what two processes
sharing this machine's cores and memory cost each other before any communication, the ceiling that
no communication setting can beat. Per thread CPU time (``thread_sample``) shows the core share of
Horovod's background thread and Open MPI's threads beside the training thread.

Per-phase times are medians over the timed epochs (after the first) of the per-step means. With
``--impl hvdkit`` rank 0 gathers every rank's phases.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from benchmarks.workers.common import add_delta, median, model_arguments, thread_sample, timed_count, write_result
from benchmarks.workers.train_torch import build, synthetic_data
from hvdkit.runtime.tuning import local_size_from_env, runtime_defaults, threads_per_rank

PHASES = ("data", "forward_backward", "wait", "update")


def parse_args() -> argparse.Namespace:
    """The worker's arguments."""
    p = argparse.ArgumentParser(description="Per-phase step times of the compute-bound model.")
    p.add_argument("--impl", choices=["hvdkit", "local"], default="hvdkit")
    model_arguments(p)
    p.add_argument("--epochs", type=timed_count, default=5, help="the first is not timed (at least 2)")
    p.add_argument("--compression", choices=["none", "fp16"], default="none", help="hvdkit only")
    return p.parse_args()


def world(impl: str) -> tuple[int, int, Any]:
    """(rank, size, Horovod module or None), Horovod initialised through hvdkit for ``hvdkit``."""
    if impl == "hvdkit":
        import horovod.torch as hvd

        import hvdkit.torch as hk

        hk.init()
        return hk.rank(), hk.size(), hvd
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    torch.set_num_threads(threads_per_rank(local_size_from_env() or size))
    return rank, size, None


def run_epoch(model: nn.Module, opt: Any, loss_fn: nn.Module, loader: DataLoader,
              distributed: bool) -> dict[str, float]:
    """One epoch; seconds spent in each phase and the epoch's wall time."""
    spent = dict.fromkeys(PHASES, 0.0)
    t_epoch = time.perf_counter()
    it = iter(loader)
    steps = 0
    while True:
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        t2 = t3 = time.perf_counter()
        if distributed:
            opt.synchronize()
            t3 = time.perf_counter()
        if distributed:
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
        t4 = time.perf_counter()
        for name, (a, b) in zip(PHASES, ((t0, t1), (t1, t2), (t2, t3), (t3, t4))):
            spent[name] += b - a
        steps += 1
    loss.item()
    spent["step"] = time.perf_counter() - t_epoch
    return {k: v / steps for k, v in spent.items()}


def main() -> None:
    """Train the compute-bound model with per-phase timers; rank 0 writes the budget."""
    args = parse_args()
    rank, size, hvd = world(args.impl)
    data = synthetic_data(args, size)
    model = build(args.inputs, args.hidden)
    opt: Any = torch.optim.SGD(model.parameters(), lr=0.01 * size)
    if hvd is not None:
        import hvdkit.torch as hk

        opt = hk.distribute(model, opt, compression=args.compression)
    sampler: DistributedSampler = DistributedSampler(data, num_replicas=size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler)
    loss_fn = nn.CrossEntropyLoss()

    epochs: list[dict[str, float]] = []
    threads: dict[str, list[float]] = {}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        before = thread_sample()
        epochs.append(run_epoch(model, opt, loss_fn, loader, hvd is not None))
        if epoch:
            add_delta(threads, before, thread_sample())
    timed = epochs[1:]
    n = len(timed) * args.steps
    mine = {"ms_per_step": {k: median([e[k] for e in timed]) * 1000 for k in (*PHASES, "step")},
            "thread_cpu_ms_per_step": {name: cpu / n for name, (cpu, _inv, _n) in threads.items()},
            "involuntary_switches_per_step": {name: inv / n for name, (_cpu, inv, _n) in threads.items()}}
    ranks = hvd.allgather_object(mine) if hvd is not None else [mine]
    if rank == 0:
        step = median([r["ms_per_step"]["step"] for r in ranks])
        write_result(args.results, {
            "impl": args.impl, "size": size, "threads": torch.get_num_threads(), "compression": args.compression,
            "cores": len(os.sched_getaffinity(0)), "batch_per_rank": args.batch, "steps": args.steps,
            "ms_per_step": step, "samples_per_s": args.batch * size / step * 1000,
            "env": {k: os.environ[k] for k in (*runtime_defaults(), "HVDKIT_NO_TUNING") if k in os.environ},
            "ranks": ranks})


if __name__ == "__main__":
    main()
