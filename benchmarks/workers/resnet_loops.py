"""ResNet-50 on synthetic images, one process: plain PyTorch, ``hk.distribute``, ``hk.Trainer`` and DDP,
in NCHW and channels_last, rounds interleaved; images/s per round and each loop's ratio to plain PyTorch.

    python -m benchmarks.workers.resnet_loops --results r.json                # on the GPU: ResNet-50, bf16
    python -m benchmarks.workers.resnet_loops --device cpu --quick --results r.json   # CPU smoke test

Every loop trains its own copy of the same model (same seed) on one batch kept on the device, with SGD
(momentum 0.9) and ``optimizer.zero_grad()`` as users write it; bf16 is ``torch.autocast`` (the Trainer's
``precision="bf16"``). DDP is ``torch.distributed`` at world size 1 (NCCL on CUDA, Gloo on the CPU), the
others run Horovod at size 1: what a single GPU costs each of them. A round runs every loop (A B C D, then
D C B A) for ``--steps`` steps after ``--warmup`` untimed ones; the Trainer's time is its epoch's (from
``on_epoch_begin`` to ``on_epoch_end``, the device synchronised at both), the others' the steps'. A loop that
raises (in its setup or a step) is reported as ``fails: <error>`` and left out of later rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from benchmarks.jobs import order
from benchmarks.stats import median, quartiles
from benchmarks.workers.common import positive, write_result
from benchmarks.workers.resnet_model import SHAPES, build
from hvdkit.core.callback import Callback

LOOPS = {"plain": "plain PyTorch", "distribute": "hk.distribute(model, opt)",
         "trainer": "hk.Trainer(...)", "ddp": "DistributedDataParallel"}
FORMATS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}
#: --quick: the CPU smoke test's sizes (seconds on 2 cores)
QUICK = {"model": "tiny", "batch": 4, "image_size": 32, "classes": 10, "steps": 2, "warmup": 1, "rounds": 2}
FULL = {"model": "resnet50", "batch": 128, "image_size": 224, "classes": 1000, "steps": 40, "warmup": 5, "rounds": 7}


class SameBatch(Dataset):
    """``steps`` items, each the whole batch ``(x, y)`` already on the device (a DataLoader with
    ``batch_size=None`` hands it over as it is): the Trainer reads what the other loops reuse."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
        self.x, self.y, self.steps = x, y, steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.y


class EpochClock(Callback):
    """Seconds of the last epoch, the device synchronised at its start and end."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.sync, self.seconds = sync, 0.0

    def on_epoch_begin(self, state: Any) -> None:
        self.sync()
        self.t0 = time.perf_counter()

    def on_epoch_end(self, state: Any) -> None:
        self.sync()
        self.seconds = time.perf_counter() - self.t0


def _failure(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:160]}"


def make_loop(kind: str, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace,
              sync: Callable[[], None]) -> Callable[[int], float]:
    """A function that trains ``n`` steps of loop ``kind`` and returns their seconds."""
    import hvdkit.torch as hk

    autocast = (torch.autocast(x.device.type, dtype=torch.bfloat16) if args.precision == "bf16"
                else contextlib.nullcontext())

    def sgd(params: Any) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)

    if kind == "trainer":
        clock = EpochClock(sync)
        trainer = hk.Trainer(model, sgd(model.parameters()), torch.nn.CrossEntropyLoss(), callbacks=[clock],
                             precision="bf16" if args.precision == "bf16" else "32", progress=False)
        epochs = [0]

        def fit(n: int) -> float:
            epochs[0] += 1
            trainer.fit(DataLoader(SameBatch(x, y, n), batch_size=None), epochs=epochs[0])
            return clock.seconds
        return fit

    net: torch.nn.Module = model
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[x.device.index] if x.device.type == "cuda" else None)
    opt = sgd(net.parameters())
    if kind == "distribute":
        opt = hk.distribute(model, opt)

    def steps(n: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            opt.zero_grad()
            with autocast:
                loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
        sync()
        return time.perf_counter() - t0
    return steps


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: cuda when torch sees a GPU, else cpu")
    p.add_argument("--quick", action="store_true", help=f"smoke-test sizes: {QUICK}")
    p.add_argument("--model", choices=list(SHAPES))
    p.add_argument("--source", choices=["auto", "torchvision", "builtin"], default="auto",
                   help="where resnet50 comes from (auto: torchvision if it imports)")
    p.add_argument("--precision", choices=["auto", "bf16", "32"], default="auto", help="auto: bf16 on CUDA, else 32")
    for name in ("batch", "image_size", "classes", "steps", "rounds"):
        p.add_argument(f"--{name.replace('_', '-')}", type=positive)
    p.add_argument("--warmup", type=int, help="untimed steps per loop before the first round")
    p.add_argument("--formats", nargs="+", choices=list(FORMATS), default=list(FORMATS))
    p.add_argument("--loops", nargs="+", choices=list(LOOPS), default=list(LOOPS))
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.warmup < 0:
        p.error(f"argument --warmup: must be an integer >= 0, got {args.warmup}")
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif args.device == "cuda" and not torch.cuda.is_available():
        p.error("argument --device: cuda was asked for, but torch sees no GPU (torch.cuda.is_available() is False)")
    if args.precision == "auto":
        args.precision = "bf16" if args.device == "cuda" else "32"
    if "plain" not in args.loops:
        p.error(f"argument --loops: must include plain (the ratios' baseline), got {' '.join(args.loops)}")
    return args


def _ddp_group(device: str) -> None:
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Set up every loop in every format, run the rounds; the results (JSON-ready)."""
    import hvdkit.torch as hk

    hk.init()
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if "ddp" in args.loops:
        _ddp_group(args.device)
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen)
    labels = torch.randint(0, args.classes, (args.batch,), generator=gen).to(device)
    described = ""
    loops: dict[str, dict[str, Callable[[int], float]]] = {f: {} for f in args.formats}
    out: dict[str, dict[str, dict[str, Any]]] = {f: {k: {} for k in args.loops} for f in args.formats}
    for fmt in args.formats:
        x = images.to(device).contiguous(memory_format=FORMATS[fmt])
        for kind in args.loops:
            torch.manual_seed(0)
            model, described = build(args.model, args.classes, args.source)
            model = model.to(device).to(memory_format=FORMATS[fmt])
            try:
                loops[fmt][kind] = make_loop(kind, model, x, labels, args, sync)
                if args.warmup:
                    loops[fmt][kind](args.warmup)
            except Exception as exc:
                out[fmt][kind]["fails"] = _failure(exc)
                loops[fmt].pop(kind, None)
    seconds: dict[str, dict[str, list[float]]] = {f: {k: [] for k in args.loops} for f in args.formats}
    for r in range(args.rounds):
        for fmt in args.formats:
            for kind in order([k for k in args.loops if k in loops[fmt]], r):
                try:
                    seconds[fmt][kind].append(loops[fmt][kind](args.steps))
                except Exception as exc:
                    out[fmt][kind]["fails"] = _failure(exc)
                    del loops[fmt][kind]
    images_per_step = args.batch
    for fmt in args.formats:
        base = seconds[fmt]["plain"]
        for kind in args.loops:
            row = out[fmt][kind]
            if "fails" in row:
                continue
            rate = [images_per_step * args.steps / s for s in seconds[fmt][kind]]
            row.update(seconds=seconds[fmt][kind], images_per_s=rate, median_images_per_s=median(rate))
            if base and kind != "plain":
                ratios = [b / s for b, s in zip(base, seconds[fmt][kind])]  # the same round's plain loop
                row.update(ratio_vs_plain=ratios, ratio_median=median(ratios), ratio_iqr=quartiles(ratios))
    if "ddp" in args.loops:
        import torch.distributed as dist

        dist.destroy_process_group()
    return {"model": described, "device": args.device,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "threads": torch.get_num_threads(), "precision": args.precision,
            "batch": args.batch, "image_size": args.image_size, "classes": args.classes, "steps": args.steps,
            "warmup": args.warmup, "rounds": args.rounds, "loops": {k: LOOPS[k] for k in args.loops},
            "formats": out}


def table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the results table: median images/s per loop and format, (ratio to plain)."""
    formats = list(result["formats"])
    rows = []
    for kind, label in result["loops"].items():
        cells = [label]
        for fmt in formats:
            r = result["formats"][fmt][kind]
            if "fails" in r:
                cells.append(f"fails: {r['fails']}")
            else:
                ratio = f" ({r['ratio_median']:.3f})" if "ratio_median" in r else ""
                cells.append(f"{r['median_images_per_s']:,.1f}{ratio}")
        rows.append(cells)
    return ["loop", *formats], rows


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    result = run(args)
    write_result(args.results, result)
    header, rows = table(result)
    print(f"{result['model']} on {result['device_name']}, precision {result['precision']}, batch {result['batch']}, "
          f"{result['image_size']}px, {result['steps']} steps x {result['rounds']} rounds; median images/s "
          f"(ratio to plain PyTorch)", flush=True)
    for line in (header, ["---"] * len(header), *rows):
        print("| " + " | ".join(line) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
