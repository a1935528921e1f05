"""Ray Train's checkpoint reporting for hvdkit's :class:`~hvdkit.callbacks.Checkpoint`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import ray.train

from hvdkit.callbacks.checkpoint import Checkpoint
from hvdkit.core.callback import Callback
from hvdkit.core.checkpoint_store import TENSORS_SUFFIX
from hvdkit.core.state import TrainState


def _put(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through a temporary name: two workers of one node may copy at once."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


class RayCheckpoint(Callback):
    """Report every epoch to Ray Train, with hvdkit's newest checkpoint when one was written.

    Each report carries the epoch's averaged logs, ``epoch``, ``global_step`` and ``lr``; rank 0 attaches
    the checkpoint ``checkpoint`` wrote that epoch (its two files) as a ``ray.train.Checkpoint``, which Ray
    copies to the run's storage. Every rank reports, as Ray requires. On a restart (``FailureConfig``) the
    files of Ray's latest checkpoint are put in ``checkpoint``'s folder where missing, so a node whose folder
    is not shared resumes too; ``checkpoint`` then resumes from the newest valid checkpoint there and
    rescales the LR if the world size changed.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"checkpoint must be the hvdkit.callbacks.Checkpoint of this run, got {checkpoint!r}")
        self.checkpoint = checkpoint
        self.reported: tuple[int, int] | None = None  # (epoch, global step) of the last checkpoint reported
        restored = ray.train.get_checkpoint()
        if restored is not None:  # before the Checkpoint callback reads its folder on train begin
            folder = Path(checkpoint.directory)
            folder.mkdir(parents=True, exist_ok=True)
            with restored.as_directory() as d:
                for f in Path(d).iterdir():
                    if f.is_file() and not (folder / f.name).exists():
                        _put(f, folder / f.name)

    def on_epoch_save(self, state: TrainState) -> None:
        """Report this epoch (every rank), with the checkpoint written for it (rank 0)."""
        metrics: dict[str, Any] = {k: v for k, v in state.logs.items() if isinstance(v, (int, float))}
        metrics.update(epoch=state.epoch, global_step=state.global_step, lr=state.ops.get_lr())
        manifest = self.checkpoint.wait()  # None on ranks other than the writer
        if manifest is None or (manifest.epoch, manifest.global_step) == self.reported:
            ray.train.report(metrics)
            return
        folder = Path(self.checkpoint.directory)
        with tempfile.TemporaryDirectory(prefix="hvdkit-ray-") as tmp:
            for name in (manifest.payload, manifest.payload.removesuffix(TENSORS_SUFFIX) + ".json"):
                try:
                    os.link(folder / name, Path(tmp, name))
                except OSError:  # another file system
                    shutil.copyfile(folder / name, Path(tmp, name))
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))
        self.reported = (manifest.epoch, manifest.global_step)
