"""Atomic, checksummed, keep-N checkpoints on real files, including a writer SIGKILLed mid-write."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hvdkit.core import CheckpointStore

REPO = Path(__file__).resolve().parents[2]


def save(store, n, payload=None):
    return store.save(payload or f"payload-{n}".encode(), epoch=n, global_step=10 * n, world_size=2, framework="t")


def test_save_and_latest(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    for n in range(1, 4):
        save(store, n)
    manifest, data = store.latest()
    assert (manifest.epoch, manifest.global_step, manifest.world_size, manifest.framework) == (3, 30, 2, "t")
    assert data == b"payload-3"


def test_keep_n_prunes_oldest(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for n in range(1, 6):
        save(store, n)
    store.flush()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt-000004-0000000040.bin", "ckpt-000004-0000000040.json",
        "ckpt-000005-0000000050.bin", "ckpt-000005-0000000050.json"]


def test_truncated_newest_is_skipped_with_a_warning_naming_it(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    m2 = save(store, 2, b"x" * 1000)
    (tmp_path / m2.payload).write_bytes(b"x" * 10)
    with caplog.at_level("WARNING", logger="hvdkit"):
        manifest, data = store.latest()
    assert manifest.epoch == 1 and data == b"payload-1"
    assert m2.payload in caplog.text and "truncated" in caplog.text


def test_corrupt_newest_is_skipped(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    m2 = save(store, 2)
    (tmp_path / m2.payload).write_bytes(b"payload-X")  # same size, other content
    with caplog.at_level("WARNING", logger="hvdkit"):
        assert store.latest()[0].epoch == 1
    assert "fails its checksum (xxh3_128)" in caplog.text


def test_unreadable_manifest_is_skipped(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    (tmp_path / "ckpt-000009-0000000090.json").write_text("{not json")
    assert store.latest()[0].epoch == 1


def test_empty_or_missing_directory_has_no_checkpoint(tmp_path):
    assert CheckpointStore(tmp_path / "nope").latest() is None


def test_directory_that_is_a_file_is_rejected(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="which is an existing file"):
        CheckpointStore(f)


WRITER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[2])
    import hvdkit.core.checkpoint_store as cs
    store = cs.CheckpointStore(sys.argv[1], keep=3)
    store.save(b"good" * 1000, epoch=1, global_step=10, world_size=2, framework="t")
    real_fsync = os.fsync
    def fsync_then_block(fd):
        real_fsync(fd)
        # The payload of checkpoint 2 is half written: tell the parent, then wait to be killed.
        sys.stdout.write("MIDWRITE\\n"); sys.stdout.flush()
        sys.stdin.read()
    cs.os.fsync = fsync_then_block
    def partial(path, data):
        fd, tmp = cs.tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                      dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data[: len(data) // 2]); f.flush(); cs.os.fsync(f.fileno())
    cs._atomic_write = partial
    store.save(b"new!" * 100000, epoch=2, global_step=20, world_size=2, framework="t")
""")


def test_writer_sigkilled_mid_write_leaves_previous_checkpoint_loadable(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(REPO)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "MIDWRITE"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())  # the killed write really started
    store = CheckpointStore(tmp_path, keep=3)
    manifest, data = store.latest()
    assert manifest.epoch == 1 and data == b"good" * 1000
    save(store, 3)  # the next save cleans the dead writer's temporary file
    store.flush()
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_prune_removes_only_temporary_files_of_dead_writers(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=30)
    dead_pid = int(dead.stdout)
    store = CheckpointStore(tmp_path, keep=3)
    leftover = tmp_path / f".ckpt-000001-0000000010.bin.{dead_pid}.abc.tmp"
    in_flight = tmp_path / f".ckpt-000002-0000000020.bin.{os.getpid()}.def.tmp"
    leftover.write_bytes(b"x")
    in_flight.write_bytes(b"y")
    save(store, 1)
    store.flush()
    assert not leftover.exists() and in_flight.exists()
