"""Atomic, checksummed, keep-N checkpoint files in one directory.

Each checkpoint is two files: ``ckpt-<epoch>-<step>.bin`` (the payload) and
``ckpt-<epoch>-<step>.json`` (the manifest: epoch, global step, world size,
framework, payload size and sha256). Both are written to a temporary file in the
same directory, fsynced, then renamed into place, the manifest last, so a crash
at any moment leaves every earlier checkpoint intact and an unfinished one
invisible (no manifest, or a checksum that does not verify). Old checkpoints are
pruned only after the new one is durable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from hvdkit.core.validation import check_int

log = logging.getLogger("hvdkit")
FORMAT_VERSION = 1
_NAME = re.compile(r"^ckpt-(\d{6})-(\d{10})\.json$")


@dataclass(frozen=True)
class Manifest:
    epoch: int  # epochs completed
    global_step: int
    world_size: int
    framework: str
    size: int
    sha256: str
    payload: str
    format: int = FORMAT_VERSION


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class CheckpointStore:
    """The checkpoint directory. Only rank 0 should call :meth:`save`."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 3) -> None:
        self.keep = check_int("keep", keep, minimum=1)
        path = Path(directory)
        if path.exists() and not path.is_dir():
            raise ValueError(f"directory must be a directory path, got {str(directory)!r}, which is an existing file")
        self.directory = path

    def _stem(self, epoch: int, step: int) -> str:
        return f"ckpt-{epoch:06d}-{step:010d}"

    def save(self, payload: bytes, *, epoch: int, global_step: int, world_size: int, framework: str) -> Manifest:
        self.directory.mkdir(parents=True, exist_ok=True)
        stem = self._stem(epoch, global_step)
        manifest = Manifest(epoch=epoch, global_step=global_step, world_size=world_size, framework=framework,
                            size=len(payload), sha256=hashlib.sha256(payload).hexdigest(), payload=f"{stem}.bin")
        _atomic_write(self.directory / manifest.payload, payload)
        _atomic_write(self.directory / f"{stem}.json", json.dumps(asdict(manifest), sort_keys=True).encode())
        _fsync_dir(self.directory)
        self.prune()
        return manifest

    def manifests(self) -> list[Path]:
        """Manifest files, newest first (by epoch, then step)."""
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name)]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def prune(self) -> None:
        for old in self.manifests()[self.keep:]:
            for p in (old, old.with_suffix(".bin")):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
        # Leftovers of writers that died mid-write.
        for tmp in self.directory.glob(".ckpt-*.tmp"):
            tmp.unlink(missing_ok=True)

    def read(self, manifest_path: Path) -> tuple[Manifest, bytes]:
        """Read and verify one checkpoint; raises ValueError naming the file if it is damaged."""
        try:
            manifest = Manifest(**json.loads(manifest_path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise ValueError(f"checkpoint manifest {manifest_path} is unreadable: {exc}") from None
        payload_path = self.directory / manifest.payload
        try:
            data = payload_path.read_bytes()
        except OSError as exc:
            raise ValueError(f"checkpoint payload {payload_path} is unreadable: {exc}") from None
        if len(data) != manifest.size:
            raise ValueError(f"checkpoint {payload_path} is truncated: {len(data)} of {manifest.size} bytes")
        if hashlib.sha256(data).hexdigest() != manifest.sha256:
            raise ValueError(f"checkpoint {payload_path} fails its sha256 check")
        return manifest, data

    def latest(self) -> tuple[Manifest, bytes] | None:
        """The newest checkpoint that verifies; damaged ones are skipped with a warning."""
        for path in self.manifests():
            try:
                return self.read(path)
            except ValueError as exc:
                log.warning("skipping damaged checkpoint: %s", exc)
        return None
