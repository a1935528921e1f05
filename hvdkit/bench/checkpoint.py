"""Checkpoint save/restore throughput: hvdkit's atomic, checksummed store vs plain torch.save/torch.load.

In-process, one rank, same model, same disk. hvdkit's save = serialise the snapshot straight into a
temporary file through a checksumming writer, fsync, rename, and the manifest; restore = read,
verify the checksum, deserialise. Deleting the checkpoint beyond ``keep`` runs on a background
thread and is not timed (in training it overlaps the next epoch). ``torch.save`` overwrites one
file (no fsync, not atomic) and ``torch.load`` reads it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def run(megabytes: int = 256, repeats: int = 3, directory: str | None = None) -> dict:
    """Time hvdkit's checkpoint save/restore against plain torch.save/torch.load; return the results."""
    import torch

    from hvdkit.core.checkpoint_store import CheckpointStore
    from hvdkit.torch.ops import TorchOps

    side = int((megabytes * 1024 * 1024 / 4) ** 0.5)
    torch.manual_seed(0)
    model = torch.nn.Linear(side, side, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ops = TorchOps(model, opt)
    nbytes = side * side * 4
    res: dict[str, list[float]] = {"torch_save": [], "torch_load": [], "hvdkit_save": [], "hvdkit_load": []}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        plain = Path(tmp) / "plain.pt"
        store = CheckpointStore(Path(tmp) / "store", keep=1)
        for i in range(repeats):
            t0 = time.perf_counter()
            torch.save(ops.capture(), plain)
            res["torch_save"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(plain, weights_only=False)
            res["torch_load"].append(time.perf_counter() - t0)
            # Both paths replace the previous checkpoint each time: torch.save overwrites
            # plain.pt, the store (keep=1) prunes the older one after writing the new one.

            t0 = time.perf_counter()
            snap = ops.capture()

            def write(f: Any, snap: dict = snap) -> None:
                ops.dump(snap, f)

            store.save(write, epoch=i, global_step=i, world_size=1, framework="torch")
            res["hvdkit_save"].append(time.perf_counter() - t0)
            # The previous checkpoint is deleted on a background thread (it overlaps training);
            # wait here, outside the timings, so it does not slow the next measurement.
            store.flush()
            t0 = time.perf_counter()
            found = store.latest()
            assert found is not None
            ops.loads(found[1])
            res["hvdkit_load"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in res.items()}
    mb = nbytes / 1e6
    return {"model_mb": mb, "seconds": med, "mb_per_s": {k: mb / v for k, v in med.items()},
            "save_ratio": med["torch_save"] / med["hvdkit_save"], "load_ratio": med["torch_load"] / med["hvdkit_load"]}
