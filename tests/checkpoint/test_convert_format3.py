"""Format-3 checkpoints (written by hvdkit 895cb82: tests/checkpoint/data/make_format3.py) are refused with
the command that converts them, and `hvdkit checkpoint convert` turns them into format 4 holding exactly
what the old files held; a converted folder resumes."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import requires_horovod

from hvdkit.callbacks import Checkpoint
from hvdkit.core import CheckpointStore, Engine, LocalComm
from hvdkit.core.run_lock import LOCK_NAME

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]
if (REPO / "tests" / "unit" / "fakes.py").exists():  # the shared fake FrameworkOps, wherever the tests keep it
    sys.path.insert(0, str(REPO / "tests" / "unit"))
from fakes import DictOps, run_epochs  # noqa: E402


@pytest.fixture
def folder(tmp_path, request):
    dst = tmp_path / request.param
    shutil.copytree(DATA / f"format3-{request.param}", dst)
    return dst


def convert(*args):
    return subprocess.run([sys.executable, "-m", "hvdkit", "checkpoint", "convert", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


def listing(path):
    return sorted(p.name for p in path.iterdir() if p.name != LOCK_NAME)  # the writer lock is not a checkpoint


@pytest.mark.parametrize("folder", ["torch", "keras"], indirect=True)
def test_a_format3_folder_is_refused_before_training_with_the_command_that_converts_it(folder):
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    engine = Engine(LocalComm(), DictOps(), [Checkpoint(folder)])
    with pytest.raises(ValueError, match=rf"is in format 3 .*hvdkit checkpoint convert '{folder}'"):
        run_epochs(engine, epochs=3, steps=2)
    assert engine.state.global_step == 0
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != LOCK_NAME}  # the refused run's lock
    assert after == before  # nothing written, nothing pruned


def assert_same(old, new, where="checkpoint"):
    """Equal structure, types, dtypes and bits."""
    import torch

    if isinstance(old, torch.Tensor):
        assert isinstance(new, torch.Tensor) and new.dtype == old.dtype and torch.equal(new, old), where
    elif isinstance(old, np.ndarray):
        assert isinstance(new, np.ndarray) and new.dtype == old.dtype, where
        np.testing.assert_array_equal(new, old, err_msg=where)
    elif isinstance(old, dict):
        assert list(new) == list(old), where
        for k in old:
            assert_same(old[k], new[k], f"{where}[{k!r}]")
    elif isinstance(old, (list, tuple)):
        assert type(new) is type(old) and len(new) == len(old), where
        for i, (a, b) in enumerate(zip(old, new)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert type(new) is type(old) and (new == old or (new != new and old != old)), where


@pytest.mark.parametrize("folder", ["torch"], indirect=True)
def test_convert_in_place_keeps_every_bit_and_the_run_identity_torch(folder):
    import torch

    from hvdkit.torch.ops import load_tensors

    old_manifests = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}
    old_snapshots = {p.name: torch.load(p, map_location="cpu", weights_only=True) for p in folder.glob("*.bin")}
    proc = convert(folder)
    assert proc.returncode == 0, proc.stderr
    assert "ckpt-000002-0000000008.json: format 3 -> 4" in proc.stdout
    assert listing(folder) == ["ckpt-000001-0000000004.json", "ckpt-000001-0000000004.safetensors",
                               "ckpt-000002-0000000008.json", "ckpt-000002-0000000008.safetensors"]
    for name, old in old_manifests.items():
        stored = CheckpointStore(folder).read(folder / name)  # verifies the new checksum
        m = stored.manifest
        assert m.format == 4 and (m.epoch, m.global_step, m.run_id, m.sequence, m.written_at) == (
            old["epoch"], old["global_step"], old["run_id"], old["sequence"], old["written_at"])
        assert_same(old_snapshots[name.replace(".json", ".bin")], load_tensors(stored.state, stored.data))
    from safetensors.torch import load_file  # any safetensors reader gets the weights

    final = np.load(DATA / "format3-torch-final.npz")
    weights = load_file(folder / "ckpt-000002-0000000008.safetensors")
    for key in final.files:
        np.testing.assert_array_equal(weights[f"framework/model/{key}"].numpy(), final[key])
    assert convert(folder).stdout.count("format 4 already") == 2  # converting again changes nothing


@pytest.mark.parametrize("folder", ["keras"], indirect=True)
def test_convert_into_another_folder_keras(folder, tmp_path):
    from hvdkit.core.checkpoint_tree import join, load_numpy
    from hvdkit.tools.checkpoint_convert import read_old_keras

    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    proc = convert(folder, tmp_path / "v4")
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # the source is left as it was
    found = CheckpointStore(tmp_path / "v4").latest()
    assert found.manifest.epoch == 2 and found.manifest.framework == "keras"
    assert_same(read_old_keras((folder / "ckpt-000002-0000000004.bin").read_bytes()),
                join(found.state, load_numpy(found.data)))
    final = np.load(DATA / "format3-keras-final.npz")
    for i, w in enumerate(join(found.state, load_numpy(found.data))["framework"]["model"]):
        np.testing.assert_array_equal(w, final[f"arr_{i}"])


@pytest.mark.parametrize("folder", ["torch"], indirect=True)
def test_a_damaged_or_pickled_checkpoint_is_reported_and_left_alone(folder):
    damaged = folder / "ckpt-000001-0000000004.bin"
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    pickled = CheckpointStore(folder)
    import pickle

    pickled.save(pickle.dumps({"x": 1}), epoch=3, global_step=12, world_size=1, framework="keras")
    manifest = folder / "ckpt-000003-0000000012.json"
    record = json.loads(manifest.read_text())
    del record["manifest_checksum"]  # format 3 had none
    manifest.write_text(json.dumps({**record, "format": 3}))
    proc = convert(folder)
    assert proc.returncode == 1
    assert "ckpt-000001-0000000004.json: not converted: ValueError: fails its checksum (xxh3_128)" in proc.stderr
    assert "ckpt-000003-0000000012.json: not converted" in proc.stderr and "--trust-pickle" in proc.stderr
    assert "ckpt-000002-0000000008.json: format 3 -> 4" in proc.stdout  # the others still are
    assert damaged.exists()


def test_bad_arguments_name_the_value(tmp_path):
    (tmp_path / "file").write_text("x")
    proc = convert(tmp_path / "nope")
    assert proc.returncode == 2 and f"SRC must be a checkpoint folder, got '{tmp_path / 'nope'}'" in proc.stderr
    proc = convert(tmp_path, tmp_path / "file")
    assert proc.returncode == 2 and "DST must be a folder" in proc.stderr


RESUME = textwrap.dedent("""
    import sys
    import torch
    from torch.utils.data import TensorDataset
    import hvdkit.torch as hk
    from hvdkit.callbacks import Checkpoint
    hk.init(threads=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    ckpt = Checkpoint(sys.argv[1], keep=2, async_save=False)
    hk.Trainer(model, torch.optim.Adam(model.parameters(), lr=0.01), torch.nn.CrossEntropyLoss(),
               callbacks=[ckpt]).fit(data, epochs=3, batch_size=8, shuffle=False)
    print("RESUMED", ckpt.restored.epoch, ckpt.last_saved.epoch, ckpt.last_saved.run_id)
""")


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(180)
@pytest.mark.parametrize("folder", ["torch"], indirect=True)
def test_a_converted_torch_folder_resumes_in_the_same_run(folder):
    run_id = json.loads((folder / "ckpt-000002-0000000008.json").read_text())["run_id"]
    assert convert(folder).returncode == 0
    proc = subprocess.run([sys.executable, "-c", RESUME, str(folder)], capture_output=True, text=True, timeout=150,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"RESUMED 2 3 {run_id}" in proc.stdout
    assert listing(folder) == ["ckpt-000002-0000000008.json", "ckpt-000002-0000000008.safetensors",
                               "ckpt-000003-0000000012.json", "ckpt-000003-0000000012.safetensors"]
