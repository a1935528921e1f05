"""Checkpoint save and load: hvdkit's format 4 (safetensors + JSON, atomic, checksummed) against
``torch.save``/``torch.load``, and the training stall of an asynchronous save against a blocking one.

    python benchmarks/suites/checkpoint.py --out DIR [--quick] [--rounds N] [--stall-rounds N (0: none)]

One process, one model: a ``Linear`` of ``--megabytes`` (256; 32 with ``--quick``) trained by SGD with
momentum, so a checkpoint holds the weights and as much optimizer state, plus RNG and counters.

- *Save and load* (``save``/``load``): each round saves and loads once each way, the two alternating
  (torch first in even rounds, hvdkit first in odd ones). hvdkit's save is what ``Checkpoint`` does on
  its writer thread: split the snapshot into JSON and tensors, write the safetensors file and the
  manifest to temporary files, fsync, rename; its load reads the file into memory, verifies the
  checksum and rebuilds the snapshot (``CheckpointStore.latest`` + ``TorchOps.loads``). ``torch.save``
  writes one file (no fsync, no rename) and ``torch.load(weights_only=True)`` reads it. Between the
  timed steps the page cache is written back (``os.sync``, untimed) so that neither pays for the other's
  dirty pages. Per round the ratio torch's time / hvdkit's time (above 1: hvdkit faster); median and
  interquartile range.
- *Stall* (``stall``): training steps (batch 16, one intra-op thread) with no save, with a blocking
  ``torch.save`` + fsync, and with ``Checkpoint(async_save=True)``'s path (staged snapshot, background
  write) every 4 steps; the modes alternate window by window so that a drifting machine slows them alike.
  An async window ends when its write is durable. ``async`` runs the process on one core (the share of one
  rank in a job that fills its cores: the save's CPU comes out of training's), ``async_spare_core`` on all
  allowed cores (reported). The stall of a save = the mode's time minus the no-save time, per save.

Writes DIR/results.json: medians, interquartile ranges, every round's times, and the command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import hvdkit from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

STALL_MODES = ("none", "blocking", "async", "async_spare_core")


def spread(xs: list[float]) -> dict[str, Any]:
    """Median, interquartile range (inclusive quartiles), min and max of ``xs``."""
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return {"median": statistics.median(xs), "iqr": [q[0], q[2]], "min": min(xs), "max": max(xs), "n": len(xs)}


def alternate(items: tuple[Any, ...], i: int) -> tuple[Any, ...]:
    """``items`` in round ``i``'s order: as given in even rounds, reversed in odd ones."""
    return items if i % 2 == 0 else items[::-1]


def model_and_optimizer(megabytes: int) -> tuple[Any, Any]:
    import torch

    side = int((megabytes * 1024 * 1024 / 4) ** 0.5)
    torch.manual_seed(0)
    model = torch.nn.Linear(side, side, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    model(torch.randn(2, side)).square().mean().backward()
    opt.step()  # the momentum buffers exist: the checkpoint holds them
    return model, opt


def save_load(megabytes: int, rounds: int, directory: str | None) -> dict[str, Any]:
    """Save and load once each way per round, alternating; seconds per round and per-round ratios."""
    import torch

    from hvdkit.core.checkpoint_store import CheckpointStore
    from hvdkit.torch.ops import TorchOps

    model, opt = model_and_optimizer(megabytes)
    ops = TorchOps(model, opt)
    times: dict[str, list[float]] = {"torch_save": [], "torch_load": [], "hvdkit_save": [], "hvdkit_load": []}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        plain = Path(tmp) / "plain.pt"
        store = CheckpointStore(Path(tmp) / "store", keep=1)

        def with_torch(i: int) -> None:
            t0 = time.perf_counter()
            torch.save(ops.capture(), plain)
            times["torch_save"].append(time.perf_counter() - t0)
            os.sync()
            t0 = time.perf_counter()
            torch.load(plain, map_location="cpu", weights_only=True)
            times["torch_load"].append(time.perf_counter() - t0)

        def with_hvdkit(i: int) -> None:
            t0 = time.perf_counter()
            tree, payload = ops.dump(ops.capture())
            store.save(payload, state=tree, epoch=i, global_step=i, world_size=1, framework="torch")
            times["hvdkit_save"].append(time.perf_counter() - t0)
            store.flush()  # the older checkpoint's deletion overlaps training in a run: untimed here
            os.sync()
            t0 = time.perf_counter()
            found = store.latest()
            assert found is not None
            ops.loads(found.state, found.data)
            times["hvdkit_load"].append(time.perf_counter() - t0)

        for i in range(rounds):
            for fn in alternate((with_torch, with_hvdkit), i):
                fn(i)
                os.sync()
        checkpoint_bytes = sum(p.stat().st_size for p in (Path(tmp) / "store").iterdir())
    save_ratio = [t / h for t, h in zip(times["torch_save"], times["hvdkit_save"])]
    load_ratio = [t / h for t, h in zip(times["torch_load"], times["hvdkit_load"])]
    return {"checkpoint_mb": checkpoint_bytes / 1e6, "rounds": rounds, "times": times,
            "seconds": {k: spread(v) for k, v in times.items()},
            "torch_over_hvdkit": {"save": spread(save_ratio), "load": spread(load_ratio)}}


def stall(megabytes: int, rounds: int, steps: int, every: int, directory: str | None) -> dict[str, Any]:
    """Seconds of training lost per save: blocking ``torch.save`` against hvdkit's async save."""
    import torch

    from hvdkit.core.background_save import BackgroundSave
    from hvdkit.core.checkpoint_store import CheckpointStore
    from hvdkit.torch.ops import TorchOps

    torch.set_num_threads(1)
    model, opt = model_and_optimizer(megabytes)
    ops = TorchOps(model, opt)
    x = torch.randn(16, model.in_features)

    def step() -> None:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    allowed = os.sched_getaffinity(0)
    one_core = {min(allowed)}
    times: dict[str, list[float]] = {mode: [] for mode in STALL_MODES}
    saves = -(-steps // every)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        plain = Path(tmp) / "plain.pt"
        store = CheckpointStore(Path(tmp) / "store", keep=1)
        writer = BackgroundSave()

        def blocking() -> None:
            with open(plain, "wb") as f:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f)
                f.flush()
                os.fsync(f.fileno())

        def background(i: int) -> None:
            snap = ops.capture_staged()  # as Checkpoint(async_save=True) does

            def write() -> None:
                tree, payload = ops.dump(snap)
                store.save(payload, state=tree, epoch=i, global_step=i, world_size=1, framework="torch")

            writer.submit(write)

        step()  # warm-up
        try:
            for r in range(rounds):
                spent = dict.fromkeys(STALL_MODES, 0.0)
                for w in range(saves):
                    for mode in alternate(STALL_MODES, r * saves + w):
                        os.sched_setaffinity(0, allowed if mode == "async_spare_core" else one_core)
                        t0 = time.perf_counter()
                        for s in range(min(every, steps - w * every)):
                            if s == 0 and mode == "blocking":
                                blocking()
                            elif s == 0 and mode.startswith("async"):
                                writer.wait()
                                background(r * saves + w)
                            step()
                        if mode.startswith("async"):
                            writer.wait()  # the write counts in its own window, never in another mode's
                        spent[mode] += time.perf_counter() - t0
                        store.flush()
                for mode, t in spent.items():
                    times[mode].append(t)
        finally:
            os.sched_setaffinity(0, allowed)
    per_save = {m: [(t - n) / saves for t, n in zip(times[m], times["none"])] for m in STALL_MODES[1:]}
    return {"rounds": rounds, "steps": steps, "saves_per_round": saves, "cpus": len(allowed), "times": times,
            "step_s": statistics.median(times["none"]) / steps,
            "stall_s": {m: spread(v) for m, v in per_save.items()},
            "async_over_blocking": spread([a / b for a, b in zip(per_save["async"], per_save["blocking"])]),
            "spare_core_async_over_blocking": spread([a / b for a, b in zip(per_save["async_spare_core"],
                                                                              per_save["blocking"])])}


def main(argv: list[str] | None = None) -> int:
    """Run both measurements; write ``--out``/results.json. 0 on success, 2 on bad arguments."""
    p = argparse.ArgumentParser(prog="benchmarks/suites/checkpoint.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="folder for results.json")
    p.add_argument("--quick", action="store_true", help="32 MB, 3 rounds, 1 stall round of 16 steps")
    p.add_argument("--rounds", type=int, default=None, help="save/load rounds (default 9; --quick 3)")
    p.add_argument("--stall-rounds", type=int, default=None, help="stall rounds (default 5; --quick 1; 0: no stall)")
    p.add_argument("--megabytes", type=int, default=None, help="the model's size (default 256; --quick 32)")
    p.add_argument("--dir", default=None, help="where the checkpoints are written (default: the temp folder)")
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    for name in ("rounds", "stall_rounds", "megabytes"):
        value, least = getattr(args, name), 0 if name == "stall_rounds" else 1
        if value is not None and value < least:
            p.error(f"--{name.replace('_', '-')} must be an integer >= {least}, got {value}")
    mb = args.megabytes or (32 if args.quick else 256)
    rounds = args.rounds or (3 if args.quick else 9)
    stall_rounds = (1 if args.quick else 5) if args.stall_rounds is None else args.stall_rounds
    steps = 16 if args.quick else 48
    args.out.mkdir(parents=True, exist_ok=True)
    sl = save_load(mb, rounds, args.dir)
    st = stall(mb, stall_rounds, steps, 4, args.dir) if stall_rounds else None
    results = {"suite": "checkpoint", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "command": " ".join(["python", "benchmarks/suites/checkpoint.py", *argv]), "model_mb": mb,
               "save_load": sl, "stall": st,
               "timings": {k: v for k, v in sl["times"].items()}}
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    s, lo = sl["torch_over_hvdkit"]["save"], sl["torch_over_hvdkit"]["load"]
    print(f"checkpoint of {sl['checkpoint_mb']:.0f} MB: torch.save/hvdkit save {s['median']:.3f} "
          f"(IQR {s['iqr'][0]:.3f}-{s['iqr'][1]:.3f}), torch.load/hvdkit load {lo['median']:.3f} "
          f"(IQR {lo['iqr'][0]:.3f}-{lo['iqr'][1]:.3f})"
          + (f"; async/blocking stall {st['async_over_blocking']['median']:.3f}" if st else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
