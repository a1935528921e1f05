"""ResNet-50 on one GPU: plain PyTorch, ``hk.distribute``, ``hk.Trainer`` and DDP in NCHW and channels_last,
bf16 autocast, rounds interleaved in one process (``benchmarks/workers/resnet_loops.py``).

``HVDKIT_BENCH_DEVICE`` picks the device: ``auto`` (default: CUDA when torch sees a GPU), ``cuda`` or ``cpu``.
With ``--quick`` (or on the CPU) the model is the built-in ``tiny`` ResNet on 32-pixel images: a smoke test
that every loop runs (CI: ``HVDKIT_BENCH_DEVICE=cpu benchmarks/run gpu --quick --out DIR``). The ResNet-50 is
torchvision's when it imports, else the built-in one (the same network); the results name which ran.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.jobs import Log, Result, run_worker
from benchmarks.stats import target

W = "benchmarks.workers.resnet_loops"
DEVICES = ("auto", "cuda", "cpu")


def device() -> str:
    """``HVDKIT_BENCH_DEVICE``, checked."""
    value = os.environ.get("HVDKIT_BENCH_DEVICE", "auto")
    if value not in DEVICES:
        raise ValueError(f"HVDKIT_BENCH_DEVICE must be one of {', '.join(DEVICES)}, got {value!r}")
    return value


def run(quick: bool, rounds: int, log: Log) -> Result:
    """Every loop in both memory formats, rounds interleaved in one process; each loop's images/s over plain
    PyTorch's, round by round."""
    dev = device()
    args = ["--device", dev, "--rounds", str(rounds), *(["--quick"] if quick else [])]
    if dev == "cpu" and not quick:  # ResNet-50 at 224 px on a few cores takes minutes a step
        args += ["--model", "tiny", "--image-size", "64", "--batch", "16", "--classes", "10", "--steps", "10"]
    log(f"ResNet loops, device {dev}, {rounds} rounds, one process")
    r = run_worker("python", 1, W, args, timeout=1800)
    log(f"model {r['model']} on {r['device_name']}, precision {r['precision']}")
    targets, timings = [], {}
    for fmt, loops in r["formats"].items():
        for kind, row in loops.items():
            if "seconds" in row:
                timings[f"gpu {fmt} {kind}"] = [s / r["steps"] for s in row["seconds"]]
            if "ratio_vs_plain" in row:
                # Trainer >= 0.99 of the plain loop is the GPU goal; on the CPU smoke test it is reported
                goal = 0.99 if kind == "trainer" and r["device"] == "cuda" else None
                targets.append(target(f"{r['loops'][kind]} / plain PyTorch, images/s, {fmt}, {r['model']}, "
                                      f"{r['device']}", row["ratio_vs_plain"], goal))
    return {"result": r, "targets": targets, "timings": timings}


def tables(suite: Result) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report's table: median images/s per loop and memory format, (median ratio to plain PyTorch), or the
    loop's error."""
    from benchmarks.workers.resnet_loops import table

    r: dict[str, Any] = suite["result"]
    header, rows = table(r)
    return [(f"{r['model']} on {r['device_name']}, precision {r['precision']}, batch {r['batch']}, "
             f"{r['image_size']} px, {r['steps']} steps x {r['rounds']} rounds interleaved in one process: median "
             "images/s (median of the per-round ratios to plain PyTorch)", header, rows)]
