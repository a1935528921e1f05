"""Atomic, checksummed file writes: the layer under :mod:`hvdkit.core.checkpoint_store`.

A file is written to a temporary name in its own directory, locked (``flock``) by its writer while it
is written, fsynced, then renamed into place, so a crash at any moment leaves either the old file or the
new one, never a mix; a temporary file whose lock can be taken belongs to a writer that died.

The checksum is XXH3-128 of the whole file: it detects truncation and corruption at ~9 GB/s, where
sha256 ran at ~0.2 GB/s and cost more than the serialisation itself (docs/benchmarks.md). It detects
accidents, not tampering.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKSUM = "xxh3_128"
#: What a file holds: its bytes, or a function that writes the file at the path it is given (a serialiser
#: such as ``safetensors``' ``save_file``, which writes by name and streams without an in-memory copy).
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
    """Write ``payload`` to ``path`` atomically; return its size and checksum. The temporary file is locked
    while it is written (see :meth:`hvdkit.core.checkpoint_store.CheckpointStore.clean_temporaries`); a
    serialiser that writes by name truncates and fills that same, locked file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if isinstance(payload, (bytes, bytearray, memoryview)):
                with open(fd, "wb", closefd=False) as f:
                    f.write(payload)
            else:
                payload(Path(tmp))
                if os.stat(tmp).st_ino != os.fstat(fd).st_ino:
                    raise RuntimeError(f"the serialiser replaced {tmp} instead of writing into it")
            os.fsync(fd)
            size, digest = file_checksum(fd)
            os.replace(tmp, path)  # still locked: a cleaner never sees an unlocked, unfinished file
        finally:
            os.close(fd)
        return size, digest
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
