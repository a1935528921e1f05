"""Atomic, checksummed file writes: the layer under :mod:`hvdkit.core.checkpoint_store`.

A file is written in a temporary directory beside its target, locked (``flock``) by its writer, fsynced,
then renamed into place: a crash leaves the old file or the new one, never a mix. The checksum
(XXH3-128, far cheaper than sha256) detects truncation and corruption, not tampering.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKSUM = "xxh3_128"
#: A file's bytes, or a function that writes the file at a given path (``safetensors``' ``save_file``).
Payload = bytes | Callable[[Path], None]


def fsync_dir(path: Path) -> None:
    """Make the renames inside directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checksum(data: Any) -> str:
    """``<algorithm>:<hex digest>`` of ``data`` (anything with the buffer protocol)."""
    import xxhash  # imported on use: `import hvdkit.core` (and `hvdkit doctor`) works without it

    return f"{CHECKSUM}:{xxhash.xxh3_128_hexdigest(data)}"


def file_checksum(fd: int) -> tuple[int, str]:
    """Size and :func:`checksum` of the open file ``fd``, read through a memory map (no copy)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, checksum(b"")
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
        return size, checksum(m)


def atomic_write(path: Path, payload: Payload) -> tuple[int, str]:
    """Write ``payload`` to ``path`` atomically; return its size and checksum. The locked temporary
    directory (``.<name>.<pid>.<random>.tmp``) also holds a serialiser's own temporary files."""
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
    lock = os.open(tmpdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        target = tmpdir / path.name
        if isinstance(payload, (bytes, bytearray, memoryview)):
            target.write_bytes(payload)
        else:
            payload(target)
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
            size, digest = file_checksum(fd)
        finally:
            os.close(fd)
        os.replace(target, path)
        return size, digest
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)  # still locked: a cleaner never takes a live writer's directory
        os.close(lock)
