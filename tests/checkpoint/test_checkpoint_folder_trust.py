"""A checkpoint folder others can write (docs/threat-model.md) is no way out of it: planted manifests and
lock files never make hvdkit delete, copy or overwrite a file outside the folder, an edited manifest is
refused naming it, one bad manifest never stops a resume, and errors name the path."""

import contextlib
import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from fakes import DictOps, run_epochs
from helpers import horovodrun, requires_horovod

from hvdkit.callbacks import Checkpoint
from hvdkit.core import CheckpointStore, Engine, LocalComm
from hvdkit.core.checkpoint_tree import numpy_payload
from hvdkit.core.run_lock import LOCK_NAME

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
RUN = "a" * 32


def save(store, n, payload=None, run_id=RUN, state=None):
    return store.save(payload or f"payload-{n}".encode(), state=state, epoch=n, global_step=10 * n, world_size=2,
                      framework="t", run_id=run_id)


def plant(folder, name, **fields):
    """A manifest written by someone else, with the run's id unless ``fields`` say otherwise."""
    record = {"epoch": 0, "global_step": 0, "world_size": 2, "framework": "t", "size": 6, "checksum": "xxh3_128:0",
              "payload": "x", "format": 4, "run_id": RUN, "sequence": 0, "written_at": 0.0, "state": None, **fields}
    (folder / name).write_text(json.dumps(record))


@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_pruning_never_deletes_a_payload_a_planted_manifest_names_outside_the_folder(tmp_path, where):
    folder, victim = tmp_path / "ckpt", tmp_path / "keys.txt"
    victim.write_text("secret")
    store = CheckpointStore(folder, keep=1)
    save(store, 1)
    store.flush()
    plant(folder, "ckpt-000000-0000000000.json", payload=str(victim) if where == "absolute" else "../keys.txt",
          size=victim.stat().st_size)  # the oldest, whole, of the run: first in line for keep=1
    for n in (2, 3):
        save(store, n)
    store.flush()
    assert victim.read_text() == "secret"
    assert store.latest().manifest.epoch == 3


def convert(*args):
    return subprocess.run([sys.executable, "-m", "hvdkit", "checkpoint", "convert", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_convert_never_copies_a_payload_from_outside_the_folder_and_names_the_manifest(tmp_path):
    src, dst = tmp_path / "a" / "src", tmp_path / "b" / "dst"
    src.mkdir(parents=True)
    (tmp_path / "a" / "secret.txt").write_text("secret")
    save(CheckpointStore(src), 1)
    plant(src, "ckpt-000009-0000000090.json", payload="../secret.txt", size=6)
    proc = convert(src, dst)
    assert proc.returncode == 1, proc.stderr
    assert f"{src / 'ckpt-000009-0000000090.json'}: not converted" in proc.stderr
    assert "payload must be a plain file name inside the checkpoint folder, got '../secret.txt'" in proc.stderr
    assert not (tmp_path / "b" / "secret.txt").exists()
    assert sorted(p.name for p in dst.iterdir()) == ["ckpt-000001-0000000010.json",
                                                     "ckpt-000001-0000000010.safetensors"]


def test_convert_names_a_manifest_that_lacks_a_field(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(DATA / "format3-torch", src)
    path = src / "ckpt-000001-0000000004.json"
    record = json.loads(path.read_text())
    del record["world_size"]
    path.write_text(json.dumps(record))
    proc = convert(src, tmp_path / "dst")
    assert proc.returncode == 1
    assert f"{path}: not converted: ValueError: checkpoint manifest {path} is damaged: it lacks world_size" \
        in proc.stderr


def test_convert_never_reads_a_payload_through_a_symbolic_link(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    m = save(CheckpointStore(src), 1)
    (tmp_path / "secret.txt").write_bytes(b"secret")
    (src / m.payload).unlink()
    (src / m.payload).symlink_to(tmp_path / "secret.txt")
    proc = convert(src, dst)
    assert proc.returncode == 1, proc.stderr
    assert f"{src / m.payload} is a symbolic link, which hvdkit does not follow" in proc.stderr
    assert not (dst / m.payload).exists()


@pytest.mark.parametrize("kind", ["symlink", "folder", "fifo", "hardlink"])
def test_a_planted_lock_file_is_never_followed_and_is_refused_naming_it(tmp_path, kind):
    folder, victim = tmp_path / "ckpt", tmp_path / "victim.txt"
    folder.mkdir()
    victim.write_text("precious")
    lock = folder / LOCK_NAME
    {"symlink": lambda: lock.symlink_to(victim), "folder": lock.mkdir, "fifo": lambda: os.mkfifo(lock),
     "hardlink": lambda: os.link(victim, lock)}[kind]()
    store = CheckpointStore(folder)
    with pytest.raises(OSError, match=rf"checkpoint writer lock '{lock}'.* remove it") as info:
        store.probe()
    assert {"symlink": "symbolic link", "folder": "a folder", "fifo": "a FIFO", "hardlink": "2 names"}[kind] \
        in str(info.value)
    del store
    assert victim.read_text() == "precious"


def test_an_edited_manifest_is_refused_naming_it_and_the_previous_checkpoint_resumes(tmp_path, caplog):
    store = CheckpointStore(tmp_path)
    save(store, 1, state={"optimizer": {"lr": 0.1}})
    m2 = save(store, 2, state={"optimizer": {"lr": 0.1}})
    path = tmp_path / f"{Path(m2.payload).stem}.json"
    record = json.loads(path.read_text())
    record["state"]["optimizer"]["lr"] = 1e9
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=rf"checkpoint manifest {path} is damaged: its content fails its checksum"):
        store.read(path)
    with caplog.at_level("WARNING", logger="hvdkit"):
        found = store.latest()
    assert found.manifest.epoch == 1 and found.state == {"optimizer": {"lr": 0.1}}
    assert f"skipping damaged checkpoint: checkpoint manifest {path} is damaged" in caplog.text


@pytest.mark.parametrize("world_size", [-1, 0, 2.5, True, "2"])
def test_a_field_out_of_range_is_refused_naming_the_file_even_with_a_matching_checksum(tmp_path, world_size):
    """Whoever edits a manifest can recompute its checksum: every field is checked as well."""
    from hvdkit.core.checkpoint_manifest import manifest_digest

    store = CheckpointStore(tmp_path)
    m1 = save(store, 1)
    path = tmp_path / f"{Path(m1.payload).stem}.json"
    record = json.loads(path.read_text())
    record["world_size"] = world_size
    record["manifest_checksum"] = manifest_digest(record)
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=rf"checkpoint manifest {path} is damaged: world_size must be an integer "
                                         rf">= 1, got {world_size!r}"):
        store.read(path)
    assert store.latest() is None


def fixture_folder(tmp_path):
    """Format 4 as written before manifests carried their own checksum (the hvdkit of 4352f4d)."""
    return Path(shutil.copytree(DATA / "format4-v1", tmp_path / "v1"))


def test_a_format4_folder_written_before_the_manifest_checksum_still_resumes(tmp_path):
    folder = fixture_folder(tmp_path)
    found = CheckpointStore(folder).latest()
    assert (found.manifest.epoch, found.manifest.world_size) == (2, 2)
    assert found.state["framework"]["optimizer"]["param_groups"][0]["lr"] == 0.2


@pytest.mark.parametrize("field, value", [("world_size", 0), ("world_size", -1), ("sequence", "7"),
                                          ("payload", None), ("payload", "../ckpt-000001-0000000004.safetensors")])
def test_an_old_format4_manifest_has_every_field_checked(tmp_path, caplog, field, value):
    folder = fixture_folder(tmp_path)
    path = folder / "ckpt-000002-0000000008.json"
    record = json.loads(path.read_text())
    record[field] = value
    path.write_text(json.dumps(record))
    with caplog.at_level("WARNING", logger="hvdkit"):
        assert CheckpointStore(folder).latest().manifest.epoch == 1
    assert f"checkpoint manifest {path} is damaged: {field}" in caplog.text


BAD_MANIFESTS = {
    "ckpt-000007-0000000070.json": json.dumps({"sequence": "7"}),
    "ckpt-000008-0000000080.json": "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads
    "ckpt-000009-0000000090.json": None,  # "payload": null, and otherwise a whole manifest
}


def plant_bad_manifests(folder, good):
    """Beside the good checkpoint ``good`` (a manifest's path), manifests that used to make latest() raise."""
    for name, text in BAD_MANIFESTS.items():
        if text is None:
            record = json.loads(good.read_text())
            text = json.dumps({**record, "payload": None, "sequence": 99})
        elif "sequence" in text:
            text = json.dumps({**json.loads(good.read_text()), "sequence": "7"})
        (folder / name).write_text(text)
    return [folder / name for name in BAD_MANIFESTS]


def test_one_bad_manifest_is_skipped_with_a_warning_naming_it(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=5)
    save(store, 1)
    m2 = save(store, 2)
    store.flush()
    bad = plant_bad_manifests(tmp_path, tmp_path / f"{Path(m2.payload).stem}.json")
    with caplog.at_level("WARNING", logger="hvdkit"):
        assert store.latest().manifest.epoch == 2
    for path in bad:
        assert f"skipping damaged checkpoint: checkpoint manifest {path} is damaged" in caplog.text
    save(store, 3)  # the next save and its pruning get past them too
    store.flush()
    assert store.latest().manifest.epoch == 3 and all(p.exists() for p in bad)


def test_a_resume_past_bad_manifests_continues_the_newest_good_checkpoint(tmp_path):
    run_epochs(Engine(LocalComm(), DictOps(), [Checkpoint(tmp_path)]), epochs=2, steps=2)
    plant_bad_manifests(tmp_path, sorted(tmp_path.glob("ckpt-*.json"))[-1])
    ckpt = Checkpoint(tmp_path)
    run_epochs(Engine(LocalComm(), DictOps(), [ckpt]), epochs=3, steps=2)
    assert ckpt.restored.epoch == 2 and ckpt.last_saved.epoch == 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what, kind", [("manifest", "symlink"), ("manifest", "fifo"), ("payload", "symlink")])
def test_a_planted_link_or_fifo_is_skipped_as_damaged_never_followed(tmp_path, caplog, what, kind):
    folder, outside = tmp_path / "ckpt", tmp_path / "outside"
    store = CheckpointStore(folder)
    save(store, 1)
    m2 = save(store, 2)
    store.flush()
    target = folder / (m2.payload if what == "payload" else f"{Path(m2.payload).stem}.json")
    shutil.move(target, outside)  # valid content, reachable only through the link
    target.symlink_to(outside) if kind == "symlink" else os.mkfifo(target)
    with caplog.at_level("WARNING", logger="hvdkit"):
        assert store.latest().manifest.epoch == 1
    assert f"{target}" in caplog.text and ("symbolic link" in caplog.text or "FIFO" in caplog.text)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_payload_and_manifest_get_one_mode_from_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        store = CheckpointStore(tmp_path)
        m_bytes = save(store, 1)
        m_tensors = save(store, 2, payload=numpy_payload({"w": np.zeros(3, np.float32)}))  # safetensors' own file
    finally:
        os.umask(old)
    for m in (m_bytes, m_tensors):
        for name in (m.payload, f"{Path(m.payload).stem}.json"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name


@contextlib.contextmanager
def as_another_user():
    """Run the block as uid 65534 (files are checked against the effective uid); root only."""
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_resumes_and_a_file_it_may_not_read_is_reported_as_such(caplog):
    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's tmp_path is private to root
    try:
        os.chmod(folder, 0o777)
        old = os.umask(0o022)
        try:
            store = CheckpointStore(folder)
            save(store, 1)
            m2 = save(store, 2)
        finally:
            os.umask(old)
        with as_another_user():
            assert CheckpointStore(folder).latest().manifest.epoch == 2  # no silent fresh start
        os.chmod(folder / m2.payload, 0o600)
        with as_another_user(), pytest.raises(PermissionError, match=rf"checkpoint file {folder / m2.payload} is "
                                                                      "not readable by this user"):
            CheckpointStore(folder).latest()
        assert "damaged" not in caplog.text
    finally:
        shutil.rmtree(folder)


def test_a_serialiser_error_on_a_full_disk_names_the_file(tmp_path):
    def full(path):
        path.write_bytes(b"half")
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")

    with pytest.raises(OSError, match=rf"writing checkpoint file '{tmp_path}/ckpt-000001-0000000010.safetensors' "
                                      "failed: RuntimeError: .*No space left on device") as info:
        save(CheckpointStore(tmp_path), 1, payload=full)
    assert info.value.errno == errno.ENOSPC
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
def test_a_real_full_disk_names_the_checkpoint_file(tmp_path):
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(tmp_path)], timeout=30).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        store = CheckpointStore(tmp_path)
        with pytest.raises(OSError, match=rf"writing checkpoint file '{tmp_path}/ckpt-000001-0000000010.safetensors'"
                                          " failed: SafetensorError: .*No space left on device") as info:
            save(store, 1, payload=numpy_payload({"w": np.zeros(1 << 18, np.float32)}))  # 1 MiB
        assert info.value.errno == errno.ENOSPC and not list(tmp_path.iterdir())
    finally:
        subprocess.run(["umount", str(tmp_path)], check=True, timeout=30)


@pytest.mark.timeout(60)
def test_planted_temporaries_that_are_links_or_fifos_neither_hang_nor_follow(tmp_path):
    folder, victim = tmp_path / "ckpt", tmp_path / "victim"
    folder.mkdir()
    victim.mkdir()
    (victim / "keep.txt").write_text("x")
    os.mkfifo(folder / ".ckpt-000001-0000000010.json.1.abc.tmp")
    (folder / ".ckpt-000002-0000000020.json.1.def.tmp").symlink_to(victim)
    store = CheckpointStore(folder)
    store.probe()
    store.clean_temporaries()
    save(store, 1)
    store.flush()
    assert (victim / "keep.txt").read_text() == "x"


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(400)
def test_two_ranks_resume_past_bad_manifests_and_pruning_stays_in_the_folder(tmp_path):
    ckpt, first, second, victim = tmp_path / "ckpt", tmp_path / "first", tmp_path / "second", tmp_path / "keys.txt"
    for d in (first, second):
        d.mkdir()
    horovodrun("torch_train.py", "--results", str(first), "--checkpoint-dir", str(ckpt), "--epochs", "2", timeout=180)
    newest = ckpt / "ckpt-000002-0000000008.json"
    bad = plant_bad_manifests(ckpt, newest)
    victim.write_text("secret")
    plant(ckpt, "ckpt-000000-0000000000.json", payload="../keys.txt", size=victim.stat().st_size,
          run_id=json.loads(newest.read_text())["run_id"])  # oldest of the run: pruned first under keep=3
    proc = horovodrun("torch_train.py", "--results", str(second), "--checkpoint-dir", str(ckpt), "--epochs", "5",
                      timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in (0, 1):
        result = json.loads((second / f"rank{r}.json").read_text())
        assert result["resumed_from"] == 2 and result["epochs_run"] == 3, result
    for path in bad:
        assert f"skipping damaged checkpoint: checkpoint manifest {path} is damaged" in proc.stdout + proc.stderr
    assert victim.read_text() == "secret"
