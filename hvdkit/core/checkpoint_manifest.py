"""A checkpoint's manifest (``ckpt-<epoch>-<step>.json``): its fields, checked on every read, and its files.

A checkpoint folder may be writable by others (a group-writable volume), so nothing read from it is
trusted: every field is type- and range-checked, ``payload`` must be a plain file name inside the folder,
and files are opened without following symbolic links and only if they are regular files. Since
``manifest_checksum`` the JSON half of a checkpoint is checksummed too; a format-4
manifest written before it is read with the field checks alone.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from hvdkit.core.atomic_file import checksum

FORMAT_VERSION = 4
MANIFEST_CHECKSUM = "manifest_checksum"


@dataclass(frozen=True)
class Manifest:
    """A checkpoint's metadata. ``payload``, ``size`` and ``checksum`` describe the safetensors file;
    ``run_id`` names the run that wrote it (a resumed run keeps it) and ``sequence`` orders its writes
    (format-2 manifests read as run ``"legacy"``, sequence -1). Raises ValueError naming a field whose
    value is of the wrong type or out of range."""

    epoch: int  # epochs completed
    global_step: int
    world_size: int
    framework: str
    size: int
    checksum: str  # "<algorithm>:<hex digest>"
    payload: str
    format: int = FORMAT_VERSION
    run_id: str = "legacy"
    sequence: int = -1
    written_at: float = 0.0  # Unix time, for people (order comes from sequence)

    def __post_init__(self) -> None:
        for name, minimum in (("epoch", 0), ("global_step", 0), ("world_size", 1), ("size", 0), ("format", 1),
                              ("sequence", -1)):
            value = getattr(self, name)
            if type(value) is not int or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        for name in ("framework", "checksum", "run_id"):
            if type(getattr(self, name)) is not str:
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}")
        if type(self.written_at) not in (int, float) or not math.isfinite(self.written_at):
            raise ValueError(f"written_at must be a finite number, got {self.written_at!r}")
        check_payload_name(self.payload)


def check_payload_name(name: object) -> str:
    """``name`` if it is a plain, visible file name (the payload lives beside its manifest: never a path, so
    reading, pruning and converting stay inside the folder); else ValueError."""
    if (type(name) is not str or not name or name.startswith(".") or "/" in name or "\\" in name
            or "\0" in name):
        raise ValueError(f"payload must be a plain file name inside the checkpoint folder, got {name!r}")
    return name


def payload_path(directory: Path, manifest: Manifest) -> Path:
    """Where ``manifest``'s payload is: always directly inside ``directory``."""
    return directory / check_payload_name(manifest.payload)


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path`` if it is a regular file, opened without following a symbolic link
    (and without blocking on a FIFO); else OSError naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise OSError(exc.errno, f"{path} is a symbolic link, which hvdkit does not follow") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file (a {file_kind(mode)})")
    return fd


def file_kind(mode: int) -> str:
    """What ``mode`` says a file is, for messages."""
    return ("folder" if stat.S_ISDIR(mode) else "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "symbolic link" if stat.S_ISLNK(mode) else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "regular file")


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`)."""
    fd = open_regular(path)
    with open(fd, "rb", closefd=True) as f:
        return f.read()


def manifest_digest(record: dict[str, Any]) -> str:
    """The checksum of a manifest's content but its own checksum field: the JSON text it re-serialises to
    (Python writes it, so a parsed manifest re-serialises to exactly what was checksummed)."""
    body = {k: v for k, v in record.items() if k != MANIFEST_CHECKSUM}
    return checksum(json.dumps(body, allow_nan=False, separators=(",", ":")).encode())


def manifest_text(manifest: Manifest, state: Any) -> bytes:
    """The manifest file's bytes: ``manifest``'s fields, ``state`` and the checksum of both."""
    record = {**asdict(manifest), "state": state}  # not sorted: the state keeps its order (an optimizer's)
    record[MANIFEST_CHECKSUM] = manifest_digest(record)
    return json.dumps(record, allow_nan=False).encode()


def load_manifest(path: Path) -> tuple[Manifest, Any]:
    """The manifest in the file ``path`` and its ``state``. ValueError naming the file if it is damaged
    (not JSON, a field missing or wrong, its checksum failing); OSError (PermissionError: not readable by
    this user) naming it if it cannot be read. Fields this hvdkit does not know are ignored."""
    raw = read_regular(path)
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"a manifest is a JSON object, got {type(data).__name__}")
        known = {f.name: data[f.name] for f in fields(Manifest) if f.name in data}
        missing = [f.name for f in fields(Manifest) if f.name not in data and f.name not in _DEFAULTS]
        if missing:
            raise ValueError(f"it lacks {', '.join(missing)}")
        known.setdefault("format", 2)  # every manifest since format 2 names its format
        manifest = Manifest(**known)
        if MANIFEST_CHECKSUM in data and data[MANIFEST_CHECKSUM] != manifest_digest(data):
            raise ValueError("its content fails its checksum (edited or corrupted after it was written)")
    except RecursionError:
        raise ValueError(f"checkpoint manifest {path} is damaged: JSON nested too deeply") from None
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"checkpoint manifest {path} is damaged: {exc}") from None
    return manifest, data.get("state")


def read_manifest(path: Path) -> Manifest:
    """The manifest in the file ``path`` (:func:`load_manifest`)."""
    return load_manifest(path)[0]


_DEFAULTS = {f.name for f in fields(Manifest) if f.default is not MISSING}
