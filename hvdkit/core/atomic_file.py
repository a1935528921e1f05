"""Atomic, checksummed file writes: the layer under :mod:`hvdkit.core.checkpoint_store`.

A file is written to a temporary name in its own directory, locked (``flock``) by its writer while it
is written, fsynced, then renamed into place, so a crash at any moment leaves either the old file or the
new one, never a mix; a temporary file whose lock can be taken belongs to a writer that died.

The payload is streamed into the file by the serialiser (no in-memory copy) through a writer that
computes an XXH3-128 checksum on the way: it detects truncation and corruption at ~9 GB/s, where
sha256 ran at ~0.2 GB/s here and cost more than ``torch.save`` itself (docs/benchmarks.md). It detects
accidents, not tampering.

A write may overwrite a ``spare``, an open and locked file of an earlier write, instead of creating one
(why: :mod:`hvdkit.core.checkpoint_store`).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CHECKSUM = "xxh3_128"
Payload = bytes | Callable[[BinaryIO], None]


def fsync_dir(path: Path) -> None:
    """Make the renames inside directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checksum(data: bytes) -> str:
    """``<algorithm>:<hex digest>`` of ``data``."""
    import xxhash  # imported on use: `import hvdkit.core` (and `hvdkit doctor`) works without it

    return f"{CHECKSUM}:{xxhash.xxh3_128_hexdigest(data)}"


class ChecksumWriter:
    """A binary file wrapper that checksums and counts what goes through ``write``."""

    def __init__(self, f: BinaryIO) -> None:
        import xxhash

        self.f = f
        self.hasher = xxhash.xxh3_128()
        self.size = 0

    def write(self, data: bytes) -> int:
        """Checksum, count and write ``data``; returns what the file's ``write`` returns."""
        view = memoryview(data)
        self.hasher.update(view)
        self.size += view.nbytes
        return self.f.write(view)

    def flush(self) -> None:
        """Flush the wrapped file."""
        self.f.flush()

    @property
    def digest(self) -> str:
        """``<algorithm>:<hex digest>`` of everything written so far."""
        return f"{CHECKSUM}:{self.hasher.hexdigest()}"


def atomic_write(path: Path, payload: Payload, spare: tuple[int, Path] | None = None) -> tuple[int, str]:
    """Write ``payload`` (bytes, or a function that writes to a binary file) atomically; return its size and
    checksum. ``spare``: an open, locked file (descriptor and path) to overwrite instead of creating one; it
    is renamed to a temporary name of ``path`` first, so a file being written is always named after what
    it will become. The temporary file is locked while it is written (see
    :meth:`hvdkit.core.checkpoint_store.CheckpointStore.clean_temporaries`)."""
    if spare is None:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    else:
        fd, tmp = spare[0], str(path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with os.fdopen(fd, "r+b", buffering=1 << 20) as f:  # closes fd, whatever happens
            if spare is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                os.rename(spare[1], tmp)  # a spare is locked already
            writer = ChecksumWriter(f)
            if isinstance(payload, (bytes, bytearray, memoryview)):
                writer.write(bytes(payload))
            else:
                payload(writer)  # type: ignore[arg-type]  # a file-like object: what serialisers need
            f.flush()
            f.truncate()  # a spare may have been longer
            os.fsync(f.fileno())
            os.replace(tmp, path)  # still locked: a cleaner never sees an unlocked, unfinished file
        return writer.size, writer.digest
    except BaseException:
        names: list[str | Path] = [tmp] if spare is None else [tmp, spare[1]]
        for name in names:
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass
        raise


def discard_locked(fd: int, path: Path) -> None:
    """Delete a spare (while still holding its lock, so no cleaner races for it), then close it."""
    try:
        path.unlink(missing_ok=True)
    finally:
        os.close(fd)
