"""Atomic, checksummed file writes: the layer under :mod:`hvdkit.core.checkpoint_store`.

A file is written in a temporary directory beside its target, locked (``flock``) by its writer, fsynced,
then renamed into place: a crash leaves the old file or the new one, never a mix. The checksum
(XXH3-128, far cheaper than sha256) detects truncation and corruption, not tampering. Files get the
mode a plain ``open`` would give them (0666 less the umask), whatever a serialiser chose.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKSUM = "xxh3_128"
#: A file's bytes, or a function that writes the file at a given path (``safetensors``' ``save_file``).
Payload = bytes | Callable[[Path], None]


def fsync_dir(path: Path) -> None:
    """Make the renames inside directory ``path`` durable; an OSError names it."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot sync directory {str(path)!r}: {exc.strerror or exc}") from exc


def file_mode() -> int:
    """0666 less the process's umask: the mode ``open`` gives a new file."""
    try:
        with open("/proc/self/status") as f:  # Linux: read without changing it (os.umask would, for every thread)
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


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
    directory (``.<name>.<pid>.<random>.tmp``) also holds a serialiser's own temporary files. Any
    failure, a serialiser's own exception too, is an OSError naming ``path``."""
    try:
        return _atomic_write(path, payload)
    except OSError as exc:
        raise OSError(exc.errno, f"writing checkpoint file {str(path)!r} failed: {exc.strerror or exc}") from exc
    except Exception as exc:  # safetensors' SafetensorError on a full disk says "... (os error 28)"
        code = re.search(r"os error (\d+)", str(exc))
        raise OSError(int(code.group(1)) if code else errno.EIO,
                      f"writing checkpoint file {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc


def _atomic_write(path: Path, payload: Payload) -> tuple[int, str]:
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
    lock = os.open(tmpdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        target = tmpdir / path.name
        if isinstance(payload, (bytes, bytearray, memoryview)):
            target.write_bytes(payload)
        else:
            payload(target)
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, file_mode())  # one rule for every file of a checkpoint
            os.fsync(fd)
            size, digest = file_checksum(fd)
        finally:
            os.close(fd)
        os.replace(target, path)
        return size, digest
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)  # still locked: a cleaner never takes a live writer's directory
        os.close(lock)
