"""Atomic, checksummed, keep-N checkpoints of one training run in one directory (format 4).

A checkpoint is ``ckpt-<epoch>-<step>.safetensors`` (the tensors) plus ``ckpt-<epoch>-<step>.json``
(the manifest, and under ``state`` everything else as JSON; docs/checkpoint-format.md). Both are
written with :func:`~hvdkit.core.atomic_file.atomic_write`, the manifest last, so a crash leaves every
earlier checkpoint intact and an unfinished one invisible.

Order and retention follow the manifests' ``sequence`` (the order of writes), not the names: after a
resume from an older checkpoint the newest is the one written last. Older formats are refused with
the command that converts them (:mod:`hvdkit.tools.checkpoint_convert`), never skipped as damaged.
"""

from __future__ import annotations

import fcntl
import logging
import mmap
import os
import re
import shutil
import stat
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, NamedTuple

from hvdkit.core import run_lock
from hvdkit.core.atomic_file import CHECKSUM, Payload, atomic_write, checksum, fsync_dir
from hvdkit.core.checkpoint_manifest import (
    FORMAT_VERSION,
    Manifest,
    load_manifest,
    manifest_text,
    open_regular,
    payload_path,
    read_manifest,
)
from hvdkit.core.validation import check_int

log = logging.getLogger("hvdkit")
_NAME = re.compile(r"^ckpt-(\d{6})-(\d{10})\.json$")
TENSORS_SUFFIX = ".safetensors"
__all__ = ["FORMAT_VERSION", "TENSORS_SUFFIX", "CheckpointStore", "Manifest", "OldFormatError", "Stored",
           "new_run_id", "read_manifest"]


class OldFormatError(ValueError):
    """A checkpoint of an older format: the message says how to convert it."""


class Stored(NamedTuple):
    """A checkpoint as read: its manifest, its JSON state, its tensor file's bytes (a NumPy uint8 array, verified)."""

    manifest: Manifest
    state: Any
    data: Any


def new_run_id() -> str:
    """A fresh run identity."""
    return uuid.uuid4().hex


def _unreadable(path: Path, exc: OSError) -> OSError:
    """An OSError for a checkpoint file this user may not read: never "damaged", as skipping it would
    silently resume an older checkpoint, or start afresh."""
    if not isinstance(exc, PermissionError):
        return exc
    try:
        st = path.lstat()
        who = f" (mode {stat.filemode(st.st_mode)}, owner uid {st.st_uid}, group gid {st.st_gid})"
    except OSError:
        who = ""
    return PermissionError(exc.errno, f"checkpoint file {path} is not readable by this user{who}: make the "
                                      "folder's files readable to every user that resumes from it")


def _read(path: Path) -> Any:
    """The file's bytes, read straight into a new writable NumPy array: one pass over fresh memory, in plain
    pages (NumPy's own arrays ask for huge pages, whose first touch is slower and erratic on VMs)."""
    import numpy as np

    with open(open_regular(path), "rb", buffering=0) as f:
        buf = mmap.mmap(-1, max(os.fstat(f.fileno()).st_size, 1))
        view, got = memoryview(buf), 0
        while got < len(buf) and (n := f.readinto(view[got:])):  # one read(2) gives at most 2 GiB
            got += n
        view.release()
    return np.frombuffer(buf, np.uint8)[:got]


class CheckpointStore:
    """The checkpoint directory. Only rank 0 should call :meth:`save`."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 3) -> None:
        self.keep = check_int("keep", keep, minimum=1)
        path = Path(directory)
        if path.exists() and not path.is_dir():
            raise ValueError(f"directory must be a directory path, got {str(directory)!r}, which is an existing file")
        self.directory = path
        self._pruner: threading.Thread | None = None
        self._lock: run_lock.RunLock | None = None

    def probe(self) -> None:
        """Before training, write and remove a small file here and take the folder's writer lock
        (:mod:`hvdkit.core.run_lock`, held while this store lives); raises an OSError naming folder and
        reason, a :class:`~hvdkit.core.run_lock.FolderLocked` naming the live run that writes here."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.directory / ".hvdkit-write-probe", b"\0" * 4096)
            (self.directory / ".hvdkit-write-probe").unlink()
            if self._lock is None:
                self._lock = run_lock.acquire(self.directory)
                if self._lock is not None:
                    weakref.finalize(self, self._lock.release)
        except run_lock.FolderLocked:
            raise
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write checkpoints to directory {str(self.directory)!r}: "
                                     f"{exc.strerror or exc}") from exc

    def save(self, payload: Payload, *, state: Any = None, epoch: int, global_step: int, world_size: int,
             framework: str, run_id: str = "legacy") -> Manifest:
        """Write a checkpoint and return its manifest. ``payload``: the safetensors bytes, or a function
        that writes that file at a given path; ``state``: the rest, JSON-serialisable (both from
        :func:`hvdkit.core.checkpoint_tree.split`). Checkpoints of ``run_id`` beyond ``keep`` are deleted
        on a background thread (:meth:`flush` waits for it). An OSError names the file not written (a
        serialiser's own error, safetensors' on a full disk, too)."""
        self.flush()
        if self._lock is not None:
            self._lock.set_run_id(run_id)
        stem = f"ckpt-{epoch:06d}-{global_step:010d}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot create checkpoint directory {str(self.directory)!r}: "
                                     f"{exc.strerror or exc}") from exc
        sequence = 1 + max((m.sequence for _, m in self._manifests()), default=0)
        size, digest = atomic_write(self.directory / f"{stem}{TENSORS_SUFFIX}", payload)  # errors name the file
        manifest = Manifest(epoch=epoch, global_step=global_step, world_size=world_size, framework=framework,
                            size=size, checksum=digest, payload=f"{stem}{TENSORS_SUFFIX}", run_id=run_id,
                            sequence=sequence, written_at=time.time())
        try:
            atomic_write(self.directory / f"{stem}.json", manifest_text(manifest, state))
        except BaseException:
            # No manifest, no checkpoint: a payload left behind would hold its disk space for good.
            (self.directory / f"{stem}{TENSORS_SUFFIX}").unlink(missing_ok=True)
            raise
        fsync_dir(self.directory)
        # Not a daemon: keep-N still holds after the interpreter exits.
        self._pruner = threading.Thread(target=self.prune, args=(manifest,), name="hvdkit-checkpoint-prune")
        self._pruner.start()
        return manifest

    def flush(self) -> None:
        """Wait until the deletion of checkpoints beyond ``keep`` has finished."""
        if self._pruner is not None:
            self._pruner.join()
            self._pruner = None

    def _manifests(self) -> list[tuple[Path, Manifest]]:
        """Readable manifests, newest first (by sequence; format-2 manifests after, by name)."""
        return self._scan()[0]

    def _scan(self) -> tuple[list[tuple[Path, Manifest]], list[tuple[Path, OSError | ValueError]]]:
        """The readable manifests, newest first (:meth:`_manifests`), and the others with the reason."""
        found, bad = [], []
        for p in self.manifests():
            try:
                found.append((p, read_manifest(p)))
            except (OSError, ValueError) as exc:
                bad.append((p, exc))
        return sorted(found, key=lambda pm: (pm[1].sequence, pm[0].name), reverse=True), bad

    def manifests(self) -> list[Path]:
        """Manifest files (readable or not), by name, newest name first."""
        if not self.directory.is_dir():
            return []
        return sorted((p for p in self.directory.iterdir() if _NAME.match(p.name)), key=lambda p: p.name,
                      reverse=True)

    def run_ids(self) -> set[str]:
        """The runs whose checkpoints are in the folder."""
        return {m.run_id for _, m in self._manifests()}

    def _whole(self, manifest: Manifest) -> bool:
        """Cheap validity: the payload exists with the size the manifest records (no checksum read)."""
        try:
            st = payload_path(self.directory, manifest).lstat()
            return stat.S_ISREG(st.st_mode) and st.st_size == manifest.size
        except (OSError, ValueError):
            return False

    def prune(self, written: Manifest | None = None) -> None:
        """Keep the ``keep`` newest whole checkpoints of ``written``'s run (``written`` always); delete its
        older ones and dead writers' temporaries. Damaged checkpoints and other runs' are left alone."""
        entries = self._manifests()
        run = written.run_id if written is not None else None
        kept = 0
        for path, m in entries:
            if run is not None and m.run_id != run:
                continue
            if written is not None and path.name == f"{Path(written.payload).stem}.json":
                kept += 1
                continue
            if not self._whole(m):
                continue
            if kept < self.keep:
                kept += 1
                continue
            path.unlink(missing_ok=True)  # the manifest first: from here on the checkpoint is not listed
            payload_path(self.directory, m).unlink(missing_ok=True)  # a plain name: never outside the folder
        self.clean_temporaries()

    def clean_temporaries(self) -> list[Path]:
        """Remove temporaries whose ``flock`` can be taken (their writer died); return them."""
        removed: list[Path] = []
        if not self.directory.is_dir():
            return removed
        for tmp in [*self.directory.glob(".ckpt-*.tmp"), *self.directory.glob("..hvdkit-*.tmp")]:
            try:  # not through a link, never waiting on a FIFO: names in the folder are not trusted
                fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a live writer holds it
                if tmp.is_dir() and not tmp.is_symlink():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)
                removed.append(tmp)
            except BlockingIOError:
                continue
            finally:
                os.close(fd)
        return removed

    def _remove_orphan_payloads(self) -> list[Path]:
        """Remove payload files no manifest names and none of their stem exists for (before a run's first save:
        no write is in flight); return them."""
        if not self.directory.is_dir():
            return []
        named = {m.payload for _, m in self._manifests()}
        orphans = [p for p in self.directory.glob(f"ckpt-*{TENSORS_SUFFIX}")
                   if p.name not in named and not p.with_suffix(".json").exists() and not p.is_symlink()]
        for p in orphans:
            p.unlink(missing_ok=True)
        return orphans

    def read(self, manifest_path: Path) -> Stored:
        """Read and verify one checkpoint; raises ValueError naming the file if it is damaged,
        :class:`OldFormatError` (saying how to convert it) if it is of an older format, and
        PermissionError naming the file if this user may not read it."""
        try:
            manifest, state = load_manifest(manifest_path)
        except OSError as exc:
            if isinstance(exc, PermissionError):
                raise _unreadable(manifest_path, exc) from None
            raise ValueError(f"checkpoint manifest {manifest_path} is unreadable: {exc}") from None
        if manifest.format < FORMAT_VERSION:
            raise OldFormatError(
                f"checkpoint {manifest_path} is in format {manifest.format} (a single pickled or hvdkit-format "
                f"payload, written by an older hvdkit); this hvdkit reads format {FORMAT_VERSION} (safetensors + "
                f"JSON). Convert the folder once with: hvdkit checkpoint convert {str(self.directory)!r}")
        if manifest.format > FORMAT_VERSION:
            raise OldFormatError(f"checkpoint {manifest_path} is in format {manifest.format}, newer than this "
                                 f"hvdkit reads ({FORMAT_VERSION}): upgrade hvdkit to resume it")
        path = payload_path(self.directory, manifest)
        try:
            payload = _read(path)
        except OSError as exc:
            if isinstance(exc, PermissionError):
                raise _unreadable(path, exc) from None
            raise ValueError(f"checkpoint payload {path} is unreadable: {exc}") from None
        if len(payload) != manifest.size:
            raise ValueError(f"checkpoint {path} is truncated: {len(payload)} of {manifest.size} bytes")
        if not manifest.checksum.startswith(f"{CHECKSUM}:") or checksum(payload) != manifest.checksum:
            raise ValueError(f"checkpoint {path} fails its checksum ({manifest.checksum.split(':')[0]})")
        return Stored(manifest, state, payload)

    def latest(self) -> Stored | None:
        """The last written checkpoint that verifies; damaged ones are skipped with a warning naming them.
        An older format raises :class:`OldFormatError` (skipping it would silently lose its training), a
        checkpoint this user may not read a PermissionError naming it (skipping it would too)."""
        readable, damaged = self._scan()
        for path, exc in damaged:
            if isinstance(exc, PermissionError):
                raise _unreadable(path, exc)
            log.warning("skipping damaged checkpoint: %s", exc if str(path) in str(exc) else f"{path}: {exc}")
        for path, _ in readable:
            try:
                return self.read(path)
            except OldFormatError:
                raise
            except ValueError as exc:
                log.warning("skipping damaged checkpoint: %s", exc)
        return None

    def start(self, resume: bool, framework: str) -> Stored | None:
        """For the writer, before a run's first step: check the folder can be written, remove dead writers'
        temporary files, and return the newest whole checkpoint to resume (None: start fresh).

        Raises OSError when the folder cannot be written or a checkpoint read, and ValueError when the
        newest checkpoint is another framework's, or when ``resume`` is False and another run's
        checkpoints are here: a fresh run must not mix its checkpoints with them."""
        self.probe()
        for tmp in self.clean_temporaries():
            log.info("removed %s, left by a checkpoint writer that died", tmp)
        if not resume:
            if self.run_ids():
                raise ValueError(f"with resume=False, the folder holds checkpoints of another run (newest "
                                 f"{self.manifests()[0].name}); a fresh run must not mix its checkpoints with them. "
                                 "Resume that run (resume=True), move or delete its files, or give this run another "
                                 "directory")
        if self._lock is not None:  # no other run writes here: a payload without its manifest is a dead writer's
            for orphan in self._remove_orphan_payloads():
                log.warning("removed %s: a checkpoint payload whose manifest was never written (its writer died "
                            "between the two), so it could never be resumed", orphan)
        if not resume:
            return None
        found = self.latest()
        if found is not None and found.manifest.framework != framework:
            raise ValueError(f"its newest checkpoint {found.manifest.payload} was written by "
                             f"{found.manifest.framework!r}, but this run trains with {framework!r}; give this run "
                             "its own directory")
        return found
