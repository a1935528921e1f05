"""PyTorch adapter under real ``horovodrun -np 2``: equivalence, sync, warm-up and checkpoint resume."""

import shutil

import numpy as np
import pytest
from helpers import horovodrun, read_json, requires_horovod

from hvdkit.core import lr as lrmath

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(600)]  # may start the shared job (conftest.py)


def params(path):
    with np.load(path) as d:
        return [d[k] for k in sorted(d.files, key=lambda k: int(k.split("_")[1]))]


def run(tmp_path, name, np_, *args):
    out = tmp_path / name
    out.mkdir()
    horovodrun("torch_train.py", "--results", str(out), *args, np=np_)
    return out


@pytest.fixture(scope="module")
def uninterrupted(torch_job):
    """The shared job's (conftest.py) 4 epochs with warm-up over 2 and a checkpoint each epoch (the last 3
    kept): the LR test reads its LRs, the resume test resumes its epoch-2 checkpoint."""
    spec = torch_job("uninterrupted").args
    settings = spec[spec.index("--batch"):spec.index("--checkpoint-dir")]  # --epochs 4 included
    return torch_job.folder / "uninterrupted", torch_job.folder / "uninterrupted-ckpt", settings


def test_two_workers_batch_b_equal_one_worker_batch_2b(tmp_path, torch_job):
    torch_job("two_ranks")  # --batch 8 --epochs 3 --model-seed-per-rank, in the shared job (conftest.py)
    two = torch_job.folder / "two_ranks"
    one = run(tmp_path, "one", 1, "--batch", "16", "--epochs", "3")
    p1 = params(one / "rank0.npz")
    for r in (0, 1):
        for a, b in zip(params(two / f"rank{r}.npz"), p1):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    # parameters identical on every rank after training
    for a, b in zip(params(two / "rank0.npz"), params(two / "rank1.npz")):
        np.testing.assert_array_equal(a, b)
    # rank 1 built its model from another seed, yet training started from rank 0's weights
    init0, init1 = params(two / "rank0_init.npz"), params(two / "rank1_init.npz")
    bcast1 = params(two / "rank1_bcast.npz")
    assert any(not np.array_equal(a, b) for a, b in zip(init0, init1))
    for a, b in zip(init0, bcast1):
        np.testing.assert_array_equal(a, b)
    # the run really trained
    assert any(not np.allclose(a, b) for a, b in zip(p1, init0))


def test_lr_at_each_step_follows_the_warmup_formula(uninterrupted):
    out = uninterrupted[0]  # lr 0.2, warm-up over 2 of 4 epochs, batch 8 (conftest.py)
    for r in (0, 1):
        res = read_json(out / f"rank{r}.json")
        spe = res["steps_per_epoch"]
        assert spe == 4  # 64 samples / 2 workers / batch 8
        total = 2 * spe
        assert len(res["lrs"]) == 4 * spe
        for k, used in res["lrs"]:
            expected = 0.2 * (1 / 2 + (1 - 1 / 2) * k / total) if k < total else 0.2
            assert used == pytest.approx(expected, rel=1e-12), (k, used, expected)
            assert used == pytest.approx(lrmath.warmup_lr(0.2, k, total, 2), rel=1e-12)
        assert res["lrs"][0][1] == pytest.approx(0.1)  # starts at the single-worker LR T/n


def test_resume_from_checkpoint_gives_the_uninterrupted_result(tmp_path, uninterrupted):
    full, full_ckpt, settings = uninterrupted
    assert read_json(full / "rank0.json")["resumed_from"] is None
    # The folder as a job stopped after epoch 2 left it: only that epoch's checkpoint.
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    epoch2 = sorted(full_ckpt.glob("ckpt-000002-*"))
    assert [f.suffix for f in epoch2] == [".json", ".safetensors"], sorted(full_ckpt.iterdir())
    for f in epoch2:
        shutil.copy2(f, ckpt / f.name)
    second = run(tmp_path, "second", 2, *settings, "--checkpoint-dir", str(ckpt))
    res = read_json(second / "rank1.json")
    assert res["resumed_from"] == 2 and res["epochs_run"] == 2 and res["global_step"] == 16
    # warm-up continued where it stopped: the LRs of epochs 3-4 equal the uninterrupted run's
    assert res["lrs"] == read_json(full / "rank1.json")["lrs"][8:]
    for r in (0, 1):
        for a, b in zip(params(second / f"rank{r}.npz"), params(full / f"rank{r}.npz")):
            np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    history = read_json(second / "rank0.json")["history"]["loss"]
    assert history[:2] == read_json(full / "rank0.json")["history"]["loss"][:2]
