"""Atomic, checksummed, keep-N checkpoints on real files, including a writer SIGKILLed mid-write."""

import json
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
    manifest, state, data = store.latest()
    assert (manifest.epoch, manifest.global_step, manifest.world_size, manifest.framework) == (3, 30, 2, "t")
    assert manifest.format == 4 and state is None and data.tobytes() == b"payload-3"


def test_the_state_travels_in_the_manifest_as_json(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    state = {"counters": {"epoch": 2, "history": {"loss": [0.5, 0.25]}}, "rng": [1, [2, 3]]}
    m = store.save(b"tensors", state=state, epoch=2, global_step=20, world_size=1, framework="t")
    on_disk = json.loads((tmp_path / "ckpt-000002-0000000020.json").read_text())
    assert on_disk["state"] == state and on_disk["format"] == 4 and on_disk["payload"] == m.payload
    assert m.payload == "ckpt-000002-0000000020.safetensors"
    assert store.latest().state == state


def test_keep_n_prunes_oldest(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for n in range(1, 6):
        save(store, n)
    store.flush()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt-000004-0000000040.json", "ckpt-000004-0000000040.safetensors",
        "ckpt-000005-0000000050.json", "ckpt-000005-0000000050.safetensors"]


def test_truncated_newest_is_skipped_with_a_warning_naming_it(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    m2 = save(store, 2, b"x" * 1000)
    (tmp_path / m2.payload).write_bytes(b"x" * 10)
    with caplog.at_level("WARNING", logger="hvdkit"):
        manifest, _, data = store.latest()
    assert manifest.epoch == 1 and data.tobytes() == b"payload-1"
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
    def partial(path, data):
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
    manifest, _, data = store.latest()
    assert manifest.epoch == 1 and data.tobytes() == b"good" * 1000
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


def test_a_failed_write_leaves_no_temporary_and_the_last_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    for n in (1, 2):
        save(store, n, b"x" * 1000 * n)
    store.flush()

    def half_then_full_disk(path):
        path.write_bytes(b"y" * 500)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        store.save(half_then_full_disk, epoch=3, global_step=30, world_size=1, framework="t")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert store.latest().data.tobytes() == b"x" * 2000
    save(store, 4)
    assert store.latest().data.tobytes() == b"payload-4"


def test_a_manifest_that_cannot_be_written_takes_its_payload_with_it(tmp_path, monkeypatch):
    # A disk that fills between the payload and its manifest: the payload alone is no checkpoint, and left
    # behind it would hold its space for good (keep-N deletes only listed checkpoints).
    from hvdkit.core import checkpoint_store

    store = CheckpointStore(tmp_path, keep=2)
    save(store, 1)
    real = checkpoint_store.atomic_write

    def full_at_the_manifest(path, data):
        if str(path).endswith(".json"):
            raise OSError(28, f"writing checkpoint file {str(path)!r} failed: No space left on device")
        return real(path, data)

    monkeypatch.setattr(checkpoint_store, "atomic_write", full_at_the_manifest)
    with pytest.raises(OSError, match="No space left on device"):
        save(store, 2)
    monkeypatch.undo()
    store.flush()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "ckpt-000001-0000000010.json", "ckpt-000001-0000000010.safetensors"]
    assert store.latest().manifest.epoch == 1


def test_a_run_starts_by_removing_payloads_whose_manifest_was_never_written(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    store.flush()
    (tmp_path / "ckpt-000002-0000000020.safetensors").write_bytes(b"x" * 100)  # its writer died before the manifest
    (tmp_path / "ckpt-notes.txt").write_text("the user's")  # not a payload: left alone
    found = store.start(resume=True, framework="t")
    assert found is not None and found.manifest.epoch == 1
    assert not (tmp_path / "ckpt-000002-0000000020.safetensors").exists()
    assert (tmp_path / "ckpt-000001-0000000010.safetensors").exists() and (tmp_path / "ckpt-notes.txt").exists()
    assert "ckpt-000002-0000000020.safetensors: a checkpoint payload whose manifest was never written" in caplog.text
