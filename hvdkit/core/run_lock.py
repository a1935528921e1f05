"""One live writer per checkpoint folder: ``fcntl.flock`` on ``.hvdkit-writer.lock``, held while the run lives.

The file also holds the holder's record (host, PID, run id, start time) as JSON; a clean end empties it.
The kernel drops a flock however its holder exits, so a dead job's lock needs no PID check (which would
work only on its host): the next run takes it, and a record left behind names the run that died. NFSv4
frees a dead client's locks when its lease expires; a filesystem without locks (some FUSE mounts, Lustre
without ``-o flock``) gets a warning. ``HVDKIT_CHECKPOINT_WAIT=<seconds>`` makes a second run wait.

The lock file is opened without following a symbolic link and used only if it is a regular file with
one name: a link planted by another writer of the folder would otherwise have its target overwritten.
(``filelock`` would not do: it opens with ``O_TRUNC``, erasing the holder record a waiting run reports.)
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path

log = logging.getLogger("hvdkit")
LOCK_NAME = ".hvdkit-writer.lock"
WAIT_VAR = "HVDKIT_CHECKPOINT_WAIT"
_POLL_S = 0.2


class FolderLocked(OSError):
    """Another live run writes to this checkpoint folder; the message names the folder and the holder."""


def _holder_text(record: dict) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("since", 0)))
    return (f"host {record.get('host', '?')}, PID {record.get('pid', '?')}, "
            f"run id {record.get('run_id') or 'not chosen yet'}, since {since}")


def _read_record(fd: int) -> dict | None:
    """The holder record in the open lock file: None when empty (a clean release), {} when unreadable."""
    data = os.pread(fd, 4096, 0)
    if not data.strip():
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


class RunLock:
    """The writer lock of one folder, held by this process (shared by every store on that folder here)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._users = 1
        self.record = {"host": socket.gethostname(), "pid": os.getpid(), "run_id": None, "since": time.time()}
        self._write()

    def _write(self) -> None:
        assert self._fd is not None
        data = json.dumps(self.record).encode()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def set_run_id(self, run_id: str) -> None:
        """Record the run that writes (known once resuming has decided it)."""
        if self._fd is not None and self.record["run_id"] != run_id:
            self.record["run_id"] = run_id
            self._write()

    def release(self) -> None:
        """One user less; the last one empties the record and drops the lock."""
        with _registry_guard:
            self._users -= 1
            if self._users > 0 or self._fd is None:
                return
            _registry.pop(str(self.path), None)
            fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # a clean end: the next run has no dead holder to report
        finally:
            os.close(fd)  # drops the flock


_registry: dict[str, RunLock] = {}
_registry_guard = threading.Lock()


def wait_seconds(environ: dict[str, str] | None = None) -> float:
    """How long to wait for a held folder (``HVDKIT_CHECKPOINT_WAIT``, checked in hvdkit.runtime.env_vars)."""
    text = (os.environ if environ is None else environ).get(WAIT_VAR, "0")
    try:
        return max(0.0, float(text))
    except ValueError:
        raise ValueError(f"{WAIT_VAR} must be a number of seconds >= 0, got {text!r}") from None


def _open(path: Path) -> int:
    """The lock file, opened read-write (created 0666 less the umask) if it is a regular file with one name;
    else an OSError naming it and saying what it is."""
    try:  # O_NONBLOCK: opening a FIFO never waits for a writer
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        what = {errno.ELOOP: "a symbolic link, which hvdkit does not follow",
                errno.EISDIR: "a folder"}.get(exc.errno or 0, exc.strerror or str(exc))
        raise OSError(exc.errno, f"checkpoint writer lock {str(path)!r} cannot be opened: it is {what}; "
                                 "remove it (hvdkit creates it as a regular file)") from None
    st = os.fstat(fd)
    problem = (None if stat.S_ISREG(st.st_mode) and st.st_nlink == 1
               else f"a {_kind(st.st_mode)}" if not stat.S_ISREG(st.st_mode)
               else f"a regular file with {st.st_nlink} names (a hard link to another file)")
    if problem is not None:
        os.close(fd)
        raise OSError(errno.EINVAL, f"checkpoint writer lock {str(path)!r} is {problem}, not a regular file: "
                                    "remove it (hvdkit creates it as a regular file)")
    return fd


def _kind(mode: int) -> str:
    return ("FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special file")


def acquire(directory: Path, *, wait: float | None = None) -> RunLock | None:
    """Take ``directory``'s writer lock (waiting up to ``wait`` seconds, default ``HVDKIT_CHECKPOINT_WAIT``);
    a :class:`FolderLocked` naming the folder and the holder when another live run has it. None, with a
    warning, on a filesystem without locks."""
    path = Path(os.path.realpath(directory)) / LOCK_NAME
    with _registry_guard:
        held = _registry.get(str(path))
        if held is not None:
            held._users += 1
            return held
    wait = wait_seconds() if wait is None else wait
    fd = _open(path)
    deadline, announced = time.monotonic() + wait, False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                record = _read_record(fd) or {}
                if time.monotonic() >= deadline:
                    raise FolderLocked(errno.EAGAIN, (
                        f"checkpoint folder {str(directory)!r} is in use by another live run ({_holder_text(record)}): "
                        f"one folder has one writer. Give this run its own folder, stop the other run, or set "
                        f"{WAIT_VAR}=<seconds> to wait for it")) from None
                if not announced:
                    log.warning("checkpoint folder %r is in use by another live run (%s): waiting up to %.0f s "
                                "(%s)", str(directory), _holder_text(record), wait, WAIT_VAR)
                    announced = True
                time.sleep(_POLL_S)  # flock has no timeout; polling a lock file is all there is
            except OSError as exc:
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    log.warning("checkpoint folder %r is on a filesystem without file locks (%s): nothing stops "
                                "a second run from writing to it", str(directory), exc.strerror)
                    os.close(fd)
                    return None
                raise
        dead = _read_record(fd)
        if dead is not None:
            log.warning("checkpoint folder %r: taking over the writer lock of a run that ended without releasing "
                        "it (%s)", str(directory), _holder_text(dead))
        lock = RunLock(path, fd)
    except BaseException:
        os.close(fd)
        raise
    with _registry_guard:
        _registry[str(path)] = lock
    return lock
