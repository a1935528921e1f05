"""One live writer per checkpoint folder: a second run is refused (or waits), naming the holder; a dead
run's lock is taken over. The holder is a real separate process, as a second job would be."""

import gc
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
from fakes import DictOps, run_epochs
from helpers import REPO, horovodrun, requires_horovod

from hvdkit.callbacks import Checkpoint
from hvdkit.core import CheckpointStore, Engine, LocalComm
from hvdkit.core.run_lock import LOCK_NAME, FolderLocked

HOLDER = textwrap.dedent("""
    import sys
    from hvdkit.core import CheckpointStore
    store = CheckpointStore(sys.argv[1])
    store.probe()
    store.save(b"weights", epoch=1, global_step=1, world_size=2, framework="dict", run_id="run-A")
    store.flush()
    print("HELD", flush=True)
    sys.stdin.read()  # holds the folder until the test closes stdin
""")
WAITER = textwrap.dedent("""
    import sys
    from hvdkit.core import CheckpointStore
    CheckpointStore(sys.argv[1]).probe()
    print("ACQUIRED", flush=True)
""")


def start(code, folder, **env):
    return subprocess.Popen([sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO), **env})


@pytest.fixture
def holder(tmp_path):
    proc = start(HOLDER, tmp_path)
    assert proc.stdout.readline().strip() == "HELD", proc.stderr.read()
    yield proc
    proc.kill()
    proc.wait(timeout=30)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()


@pytest.mark.timeout(60)
def test_a_second_run_on_a_live_folder_is_refused_naming_folder_and_holder(tmp_path, holder):
    holder_text = rf"host {socket.gethostname()}, PID {holder.pid}, run id run-A"
    with pytest.raises(FolderLocked, match=rf"{tmp_path}'? is in use by another live run \({holder_text}.*"
                                           "HVDKIT_CHECKPOINT_WAIT"):
        CheckpointStore(tmp_path).probe()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    engine = Engine(LocalComm(), DictOps(), [Checkpoint(tmp_path)])
    with pytest.raises(ValueError, match=rf"in use by another live run \({holder_text}"):  # not a silent resume
        run_epochs(engine, epochs=2, steps=2)
    assert engine.state.global_step == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.timeout(60)
def test_a_run_asked_to_wait_gets_the_folder_when_the_holder_ends(tmp_path, holder):
    waiter = start(WAITER, tmp_path, HVDKIT_CHECKPOINT_WAIT="50")
    line = waiter.stderr.readline()  # its warning, written while it waits
    assert "is in use by another live run" in line and "waiting up to 50 s (HVDKIT_CHECKPOINT_WAIT)" in line
    holder.stdin.close()  # the holder ends cleanly
    assert holder.wait(timeout=30) == 0
    out, err = waiter.communicate(timeout=30)
    assert out.strip() == "ACQUIRED" and "taking over" not in err  # a clean end leaves no dead holder


@pytest.mark.timeout(60)
def test_the_lock_of_a_killed_run_is_taken_over_with_a_warning(tmp_path, holder, caplog):
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    store = CheckpointStore(tmp_path)
    with caplog.at_level(logging.WARNING, logger="hvdkit"):
        store.probe()
    assert f"taking over the writer lock of a run that ended without releasing it (host {socket.gethostname()}, " \
           f"PID {holder.pid}, run id run-A" in caplog.text
    other = CheckpointStore(tmp_path)
    other.probe()  # the same process: one writer, shared by its stores
    record = json.loads((tmp_path / LOCK_NAME).read_text())
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    del store, other
    gc.collect()
    assert (tmp_path / LOCK_NAME).read_text() == ""  # released cleanly


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(120)
def test_a_second_horovodrun_job_on_a_live_folder_stops_on_every_rank_before_training(tmp_path, holder):
    (tmp_path / "out").mkdir()
    proc = horovodrun("torch_train.py", "--results", str(tmp_path / "out"), "--checkpoint-dir", str(tmp_path),
                      timeout=100, check=False)
    assert proc.returncode != 0
    message = f"is in use by another live run (host {socket.gethostname()}, PID {holder.pid}, run id run-A"
    assert (proc.stdout + proc.stderr).count(message) >= 2, proc.stdout[-3000:] + proc.stderr[-3000:]  # each rank
    assert not list((tmp_path / "out").iterdir())  # no rank trained to the end
