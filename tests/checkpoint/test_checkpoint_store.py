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
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == [spare_name(tmp_path)]
    store.discard_spare()
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
    import os, sys, tempfile
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
    def partial(path, data, spare=None):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                   dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data[: len(data) // 2]); f.flush(); cs.os.fsync(f.fileno())
    cs.atomic_write = partial
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


HOLDER = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("LOCKED", flush=True)
    sys.stdin.read()
""")


def test_cleanup_keys_on_the_writers_lock_not_its_pid(tmp_path):
    """A temporary file nobody writes is removed even when its name carries a live PID (PIDs repeat in
    containers); one a live writer still holds is kept."""
    store = CheckpointStore(tmp_path, keep=3)
    leftover = tmp_path / f".ckpt-000001-0000000010.bin.{os.getpid()}.abc.tmp"  # "our" PID, but nobody writes it
    in_flight = tmp_path / ".ckpt-000002-0000000020.bin.1.def.tmp"
    leftover.write_bytes(b"x")
    in_flight.write_bytes(b"y")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(in_flight)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "LOCKED"
        save(store, 1)
        store.flush()
        assert not leftover.exists() and in_flight.exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert store.clean_temporaries() == [in_flight]  # its writer is gone now


def test_retention_never_deletes_the_checkpoint_just_written_nor_counts_damaged_ones(tmp_path):
    """horovod-free regression (#13 item 3): a damaged checkpoint with a higher epoch name no longer pushes
    out the valid one just written (keep=1), and latest() is the last one written."""
    store = CheckpointStore(tmp_path, keep=1)
    m10 = save(store, 10, b"z" * 100)
    store.flush()
    (tmp_path / m10.payload).write_bytes(b"z")  # damaged (truncated)
    m9 = save(store, 9)
    store.flush()
    assert (tmp_path / m9.payload).exists() and (tmp_path / f"{Path(m9.payload).stem}.json").exists()
    assert (tmp_path / m10.payload).exists()  # damaged: kept for inspection, never counted
    assert store.latest()[0].epoch == 9


def test_newest_is_the_last_written_not_the_highest_name(tmp_path):
    store = CheckpointStore(tmp_path, keep=5)
    for n in (5, 6, 2, 3):  # resumed from an older checkpoint: epochs 2 and 3 written after 6
        save(store, n)
    store.flush()
    assert store.latest()[0].epoch == 3


def test_prune_leaves_other_runs_alone(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    for n in (8, 9, 10):
        store.save(b"old", epoch=n, global_step=n, world_size=1, framework="t", run_id="old-run")
    store.flush()
    for n in (1, 2):
        store.save(b"new", epoch=n, global_step=n, world_size=1, framework="t", run_id="new-run")
    store.flush()
    names = sorted(p.name for p in tmp_path.glob("*.json"))
    assert names == ["ckpt-000002-0000000002.json", "ckpt-000010-0000000010.json"]


def test_a_full_disk_names_the_file(tmp_path, monkeypatch):
    import errno

    import hvdkit.core.checkpoint_store as cs

    def no_space(path, payload, spare=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cs, "atomic_write", no_space)
    with pytest.raises(OSError, match=r"writing checkpoint '.*ckpt-000001-0000000010'.bin/.json failed: No space"):
        save(CheckpointStore(tmp_path), 1)


def spare_name(folder):
    names = [p.name for p in folder.iterdir() if p.name.startswith(".ckpt-spare.") and p.name.endswith(".tmp")]
    assert len(names) == 1, sorted(p.name for p in folder.iterdir())
    return names[0]


def test_the_next_save_overwrites_the_pruned_payload_in_place(tmp_path):
    """Recycling: the pruned checkpoint's payload becomes the spare (same inode, locked, not cleaned as a
    dead writer's file) and the next save writes into it, a shorter payload truncating it."""
    store = CheckpointStore(tmp_path, keep=1)
    m1 = save(store, 1, b"a" * 50000)
    inode = (tmp_path / m1.payload).stat().st_ino
    save(store, 2, b"b" * 40000)
    store.flush()
    assert not (tmp_path / m1.payload).exists() and not (tmp_path / f"{Path(m1.payload).stem}.json").exists()
    spare = tmp_path / spare_name(tmp_path)
    assert spare.stat().st_ino == inode
    assert store.clean_temporaries() == [] and spare.exists()  # its lock is held: not a dead writer's
    m3 = save(store, 3, b"c" * 100)
    store.flush()
    assert (tmp_path / m3.payload).stat().st_ino == inode
    manifest, data = store.latest()  # verifies size and checksum
    assert manifest.epoch == 3 and data == b"c" * 100
    store.discard_spare()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000003-0000000030.bin", "ckpt-000003-0000000030.json"]


def test_a_payload_linked_elsewhere_is_deleted_not_overwritten(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt", keep=1)
    m1 = save(store, 1, b"keep me")
    os.link(tmp_path / "ckpt" / m1.payload, tmp_path / "mine.bin")  # a user keeps epoch 1
    for n in (2, 3, 4):
        save(store, n, b"later" * n)
    store.flush()
    assert (tmp_path / "mine.bin").read_bytes() == b"keep me"
    assert (tmp_path / "mine.bin").stat().st_nlink == 1  # the store's name for it is gone
    assert store.latest()[1] == b"later" * 4


def test_a_failed_write_into_the_spare_leaves_no_temporary_and_the_last_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    for n in (1, 2):
        save(store, n, b"x" * 1000 * n)
    store.flush()
    spare_name(tmp_path)

    def half_then_full_disk(f):
        f.write(b"y" * 500)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        store.save(half_then_full_disk, epoch=3, global_step=30, world_size=1, framework="t")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert store.latest()[1] == b"x" * 2000
    save(store, 4)  # and the store goes on, creating a file again
    assert store.latest()[1] == b"payload-4"


SPARE_HOLDER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from hvdkit.core import CheckpointStore
    store = CheckpointStore(sys.argv[1], keep=1)
    for n in (1, 2):
        store.save(b"x" * 1000, epoch=n, global_step=n, world_size=1, framework="t")
    store.flush()
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.parametrize("end", ["exit", "kill"])
def test_a_spare_does_not_outlive_its_process(tmp_path, end):
    """At a normal exit the store deletes its spare; after a SIGKILL the lock is gone and the next start's
    clean-up removes it as a dead writer's file."""
    proc = subprocess.run([sys.executable, "-c", SPARE_HOLDER, str(tmp_path), str(REPO), end], timeout=60)
    assert proc.returncode == (0 if end == "exit" else -signal.SIGKILL)
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    if end == "exit":
        assert leftovers == []
    else:
        assert [p.name for p in leftovers] == [spare_name(tmp_path)]
        assert CheckpointStore(tmp_path).clean_temporaries() == leftovers
    assert CheckpointStore(tmp_path).latest()[0].epoch == 2
