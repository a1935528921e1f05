"""Source archives are extracted inside their folder only, on every supported Python."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from hvdkit.tools.build.archive import UnsafeArchive, checked_members, safe_extract


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def _file(name: str, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, b"x"


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def test_a_normal_archive_extracts(tmp_path):
    src = _tar(tmp_path / "ok.tar.gz", [_file("pkg/a.txt"), _link("pkg/b.txt", "a.txt")])
    dest = tmp_path / "out"
    dest.mkdir()
    safe_extract(src, dest)
    assert (dest / "pkg" / "a.txt").read_bytes() == b"x"
    with tarfile.open(src) as tar:  # the hand-made path, as on Python < 3.11.4
        assert [m.name for m in checked_members(tar, dest)] == ["pkg/a.txt", "pkg/b.txt"]


@pytest.mark.parametrize("member", [
    _file("../evil.txt"),
    _file("/tmp/evil.txt"),
    _file("pkg/../../evil.txt"),
    _link("pkg/link", "../../etc/passwd"),
    _link("pkg/link", "/etc/passwd"),
    _link("pkg/hard", "../outside", tarfile.LNKTYPE),
], ids=["dotdot", "absolute", "nested-dotdot", "symlink-out", "symlink-absolute", "hardlink-out"])
def test_a_member_outside_the_folder_is_refused_by_the_fallback(tmp_path, member):
    src = _tar(tmp_path / "bad.tar.gz", [member])
    dest = tmp_path / "out"
    dest.mkdir()
    with tarfile.open(src) as tar, pytest.raises(UnsafeArchive, match="outside the extraction folder"):
        checked_members(tar, dest)
    before = sorted(tmp_path.parent.rglob("*"))
    try:  # Python's own data filter refuses these, or (absolute names) strips the leading "/"
        safe_extract(src, dest)
    except (UnsafeArchive, tarfile.TarError):
        pass
    outside = [p for p in sorted(tmp_path.parent.rglob("*")) if p not in before and dest not in p.parents]
    assert outside == []
    assert not Path("/tmp/evil.txt").exists()


def test_devices_and_setuid_bits_are_not_extracted(tmp_path):
    dev = tarfile.TarInfo("pkg/dev")
    dev.type = tarfile.CHRTYPE
    src = _tar(tmp_path / "dev.tar.gz", [(dev, None)])
    with tarfile.open(src) as tar, pytest.raises(UnsafeArchive, match="special file"):
        checked_members(tar, tmp_path)
    src = _tar(tmp_path / "suid.tar.gz", [_file("pkg/run", 0o4777)])
    with tarfile.open(src) as tar:
        (member,) = checked_members(tar, tmp_path)
    assert member.mode == 0o755
