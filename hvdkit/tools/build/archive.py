"""Extract a source archive without letting it write outside the target folder: ``tarfile``'s
``filter="data"`` where it exists (Python >= 3.11.4; Debian bookworm has 3.11.2), else its rules by hand.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path


class UnsafeArchive(ValueError):
    """An archive member would land outside the target folder, or is not a plain file or folder."""


def _inside(root: Path, target: Path) -> bool:
    try:
        target.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def checked_members(tar: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    """The archive's members, after checking each one against ``dest``; raises UnsafeArchive."""
    root = dest.resolve()
    members = []
    for m in tar.getmembers():
        name = m.name
        if os.path.isabs(name) or ".." in Path(name).parts:
            raise UnsafeArchive(f"archive member {name!r} points outside the extraction folder")
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise UnsafeArchive(f"archive member {name!r} is a device, FIFO or other special file")
        if not _inside(root, root / name):
            raise UnsafeArchive(f"archive member {name!r} points outside the extraction folder")
        if m.issym() or m.islnk():
            link = Path(m.linkname)
            base = root / Path(name).parent if m.issym() else root
            if link.is_absolute() or not _inside(root, base / link):
                raise UnsafeArchive(f"archive link {name!r} -> {m.linkname!r} points outside the extraction folder")
        m.mode &= 0o755  # no set-uid/set-gid/sticky bits, no group/other write
        members.append(m)
    return members


def safe_extract(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into ``dest`` with the ``data`` filter or its hand-made equivalent."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.11.4
            tar.extractall(dest, members=checked_members(tar, dest))
