"""Asynchronous checkpoints (#14 item 3): the durable write runs in the background with the same crash
guarantees. A SIGKILL while a background write is in flight leaves the previous checkpoint loadable, and
the next run removes the dead writer's temporary file."""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import REPO, WORKERS, requires_horovod

from hvdkit.core import CheckpointStore

pytestmark = [requires_horovod, pytest.mark.timeout(240)]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def start(folder, epochs, *mode):
    return subprocess.Popen([sys.executable, str(WORKERS / "async_checkpoint.py"), str(folder), str(epochs), *mode],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)


def test_async_and_blocking_saves_write_the_same_checkpoint(tmp_path):
    outs = {}
    procs = {mode: start(tmp_path / mode, 3, mode) for mode in ("async", "sync")}  # independent: side by side
    try:
        results = {mode: proc.communicate(timeout=180)[0] for mode, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    for mode, out in results.items():
        assert procs[mode].returncode == 0, out[-3000:]
        outs[mode] = out.strip().splitlines()[-1]
        found = CheckpointStore(tmp_path / mode).latest()
        assert found is not None and found.manifest.epoch == 3
        assert sorted(p.name for p in (tmp_path / mode).iterdir() if p.suffix == ".json") == [
            "ckpt-000002-0000000004.json", "ckpt-000003-0000000006.json"]  # keep=2 held after fit returned
        assert not [p.name for p in (tmp_path / mode).iterdir() if p.suffix == ".tmp"]
    assert outs["async"] == outs["sync"], outs


def writing(name):
    """A checkpoint file being written."""
    return name.startswith(".ckpt-") and name.endswith(".tmp")


def test_sigkill_during_a_background_write_leaves_the_previous_checkpoint_loadable(tmp_path):
    for attempt in range(3):  # the kill must land while a write is in flight; it nearly always does at once
        folder = tmp_path / f"try{attempt}"
        proc = start(folder, 1000)
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:  # wait for: epoch 1 durable, and a later write in flight
                names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
                if "ckpt-000001-0000000002.json" in names and any(writing(n) for n in names):
                    proc.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.01)  # polling the folder, not synchronisation
            else:
                pytest.fail("no background write was seen in flight within 120 s")
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        temporaries = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
        if any(writing(p.name) for p in temporaries):
            break
    else:
        pytest.fail("three kills all landed between writes")
    store = CheckpointStore(folder)
    manifest = store.latest().manifest  # verifies the checksum
    assert manifest.epoch >= 1
    assert all(not p.name.startswith(f".{manifest.payload}.") for p in temporaries)
    # The next run's start-up removes what the killed writer left.
    assert sorted(store.clean_temporaries()) == sorted(temporaries)
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
