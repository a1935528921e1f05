"""Keras 3 adapter under real ``horovodrun -np 2``, on Keras's TensorFlow and torch backends (torch over
Horovod's MPI and Gloo controllers: see ``warm_runs``): fit (and, on TensorFlow, tape) equivalence, sync,
warm-up, checkpoint resume (within a backend, across them both ways, and after a stop signal), metric
averaging, and the jit_compile guard."""

import shutil
import signal

import numpy as np
import pytest
from helpers import horovodrun, read_json, requires_horovod, signal_mid_run

from hvdkit.core import lr as lrmath
from hvdkit.core.checkpoint_store import CheckpointStore

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(600)]


def weights(path):
    with np.load(path) as d:
        return [d[k] for k in sorted(d.files, key=lambda k: int(k.split("_")[1]))]


BACKENDS = ["tensorflow", "torch"]


def run(tmp_path, name, np_, *args, backend="tensorflow", controller="mpi"):
    """Run keras_train.py on Keras's ``backend`` over Horovod's ``controller`` (horovodrun's default, MPI, or
    ``"gloo"``); return the folder of its results (one subfolder per --mode) and the process."""
    out = tmp_path / name
    out.mkdir()
    proc = horovodrun("keras_train.py", "--results", str(out), *args, np=np_, env={"KERAS_BACKEND": backend},
                      extra=("--gloo",) if controller == "gloo" else ())
    for f in out.glob("*/rank0.json"):  # the backend and controller asked for are the ones that ran
        assert (read_json(f)["backend"], read_json(f)["controller"]) == (backend, controller), f
    return out, proc


def assert_same(a_path, b_path, atol):
    for a, b in zip(weights(a_path), weights(b_path)):
        np.testing.assert_allclose(a, b, atol=atol, rtol=0)


@pytest.fixture(scope="module")
def equivalence(tmp_path_factory):
    """Per backend, each mode from freshly seeded models, in one launch per world size (made on first use)."""
    made = {}

    def get(backend):
        if backend not in made:
            tmp = tmp_path_factory.mktemp(f"equivalence-{backend}")
            modes = ["fit", "tape"] if backend == "tensorflow" else ["fit", "fit_acc", "fit_fp16"]
            two, _ = run(tmp, "two", 2, "--mode", *modes, "--batch", "8", "--model-seed-per-rank", backend=backend)
            one, _ = run(tmp, "one", 1, "--mode", *modes, "--batch", "16", backend=backend)
            made[backend] = two, one
        return made[backend]
    return get


@pytest.mark.parametrize(("backend", "mode"), [("tensorflow", "fit"), ("tensorflow", "tape"), ("torch", "fit"),
                                               ("torch", "fit_acc"), ("torch", "fit_fp16")])
def test_two_workers_batch_b_equal_one_worker_batch_2b(equivalence, backend, mode):
    # fit_acc: 2 passes per update, averaged (the same updates at any world size); fit_fp16: the gradients
    # travel as float16 (one worker sends none), so equal to float16's precision
    two, one = (d / mode for d in equivalence(backend))
    for r in (0, 1):
        assert_same(two / f"rank{r}.npz", one / "rank0.npz", atol=2e-3 if mode == "fit_fp16" else 1e-5)
    if mode == "fit_acc":
        res = read_json(two / "rank0.json")
        assert res["updates"] == res["steps"] * 3 // 2  # 3 epochs, one update per 2 passes
    if mode == "fit_fp16":  # rounded on the way: not the float32 run's weights bit for bit
        assert any(not np.array_equal(a, b) for a, b in zip(weights(two / "rank0.npz"),
                                                            weights(two.parent / "fit" / "rank0.npz")))
    for a, b in zip(weights(two / "rank0.npz"), weights(two / "rank1.npz")):
        np.testing.assert_array_equal(a, b)
    # different seeds per rank, yet the first step starts from rank 0's initial weights
    assert any(not np.array_equal(a, b) for a, b in zip(weights(two / "rank0_init.npz"),
                                                         weights(two / "rank1_init.npz")))
    for r in (0, 1):
        for a, b in zip(weights(two / f"rank{r}_start.npz"), weights(two / "rank0_init.npz")):
            np.testing.assert_array_equal(a, b)
    assert any(not np.allclose(a, b) for a, b in zip(weights(one / "rank0.npz"), weights(one / "rank0_init.npz")))


WARM = ["--momentum", "0.9", "--warmup-epochs", "2", "--lr", "0.2"]


@pytest.fixture(scope="module")
def warm_runs(tmp_path_factory):
    """Per backend, one 2-worker run with warm-up, momentum and a checkpoint every epoch (4 epochs, keep=3:
    epochs 2-4 stay), then (TensorFlow) a jit_compile=True probe: the reference of the warm-up, resume and XLA
    tests below. Made on first use.

    Horovod's controllers (both are built; horovodrun picks MPI): the torch backend's run here goes over Gloo
    (``horovodrun --gloo``), every other launch of this module over MPI, so Keras on torch trains over both (the
    torch resume test resumes this Gloo run's checkpoint under MPI); ``run`` checks the controller used."""
    made = {}

    def get(backend):
        if backend not in made:
            tmp = tmp_path_factory.mktemp(f"warm-{backend}")
            ckpt = tmp / "ckpt"
            probe = ["--jit-probe"] if backend == "tensorflow" else []
            out, _ = run(tmp, "full", 2, *WARM, "--epochs", "4", "--checkpoint-dir", str(ckpt), *probe,
                         backend=backend, controller="gloo" if backend == "torch" else "mpi")
            made[backend] = out, ckpt
        return made[backend]
    return get


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The Keras backend a test runs on."""
    return request.param


@pytest.fixture
def warm(warm_runs, backend):
    """The warm-up run on the test's backend."""
    return warm_runs(backend)


def test_lr_at_each_batch_follows_the_warmup_formula_and_metrics_are_averaged(warm):
    out = warm[0] / "fit"
    res = [read_json(out / f"rank{r}.json") for r in (0, 1)]
    spe = res[0]["steps"]
    assert spe == 4
    for rr in res:
        assert len(rr["lrs"]) == 4 * spe
        for k, used in rr["lrs"]:
            assert used == pytest.approx(lrmath.warmup_lr(0.2, k, 2 * spe, 2), rel=1e-6), (k, used)
    # ranks saw different data: raw epoch logs differ; history holds their mean on both ranks
    assert res[0]["raw"][0]["loss"] != res[1]["raw"][0]["loss"]
    for e in range(4):
        for key in ("loss", "accuracy"):
            mean = (res[0]["raw"][e][key] + res[1]["raw"][e][key]) / 2
            assert res[0]["history"][key][e] == pytest.approx(mean, rel=1e-6)
            assert res[1]["history"][key][e] == pytest.approx(mean, rel=1e-6)


def stopped_after_epoch_2(full_ckpt, ckpt):
    """``ckpt``: a copy of ``full_ckpt`` as a run stopped after epoch 2 leaves it."""
    shutil.copytree(full_ckpt, ckpt)
    for f in ckpt.glob("ckpt-*"):
        if int(f.name.split("-")[1]) > 2:
            f.unlink()


def test_checkpoint_resume_through_fit_and_a_corrupt_newest_checkpoint(tmp_path, warm, backend):
    full, full_ckpt = warm[0] / "fit", warm[1]
    # the run's last checkpoint, written in the background as fit ends, is whole when the process has exited
    assert CheckpointStore(full_ckpt).latest().manifest.epoch == 4
    ckpt = tmp_path / "ckpt"
    stopped_after_epoch_2(full_ckpt, ckpt)
    second = run(tmp_path, "second", 2, *WARM, "--epochs", "4", "--checkpoint-dir", str(ckpt),
                 backend=backend)[0] / "fit"
    res = read_json(second / "rank1.json")
    assert res["initial_epoch"] == 2 and len(res["lrs"]) == 8
    # warm-up continued where it stopped (the new process counts its own steps from 0)
    assert [v for _, v in res["lrs"]] == pytest.approx([v for _, v in read_json(full / "rank1.json")["lrs"][8:]])
    for r in (0, 1):
        assert_same(second / f"rank{r}.npz", full / f"rank{r}.npz", atol=1e-6)
    if backend != "tensorflow":
        return  # the store's handling of a damaged file is the same on every backend: checked once
    # damage the newest checkpoint (epoch 4, the resumed run's): a new run resumes from epoch 3, warning with its name
    newest = sorted(ckpt.glob("*.safetensors"))[-1]
    newest.write_bytes(newest.read_bytes()[:100])
    third, proc = run(tmp_path, "third", 2, *WARM, "--epochs", "4", "--checkpoint-dir", str(ckpt))
    third = third / "fit"
    assert read_json(third / "rank0.json")["initial_epoch"] == 3
    assert newest.name in proc.stderr + proc.stdout and "truncated" in proc.stderr + proc.stdout
    for r in (0, 1):
        assert_same(third / f"rank{r}.npz", full / f"rank{r}.npz", atol=1e-6)


# On TensorFlow a slow_check: the same Keras code path, and torch is the backend that is new.
@pytest.mark.parametrize("backend", [pytest.param("tensorflow", marks=pytest.mark.slow_check), "torch"])
def test_a_stop_signal_to_horovodrun_ends_fit_on_every_rank_and_the_rerun_resumes_the_last_epoch(tmp_path, warm,
                                                                                                 backend):
    # Keras's fit resumes at an epoch's start only, so Checkpoint's on_signal (a checkpoint of the step in
    # flight) applies to the torch Trainer; on either Keras backend the signal, which horovodrun passes to
    # every rank as SIGUSR1, ends each rank as Python's default does, and the last epoch's checkpoint stays.
    out, ckpt = tmp_path / "stopped", tmp_path / "ckpt"
    out.mkdir()
    stopped, seconds, alive = signal_mid_run(
        out, signal.SIGTERM, "keras_train.py", "--results", str(out), *WARM, "--epochs", "4", "--checkpoint-dir",
        str(ckpt), "--wait-at-step", "9", env={"KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert alive == [], alive
    assert stopped.returncode != 0 and not (out / "fit").exists(), stopped  # ended in epoch 3, on both ranks
    assert seconds < 15, (seconds, stopped)  # at once (tests/core/test_stop_signals.py's bound for a stop)
    assert [int(f.name.split("-")[1]) for f in sorted(ckpt.glob("*.safetensors"))] == [1, 2]
    assert CheckpointStore(ckpt).latest().manifest.epoch == 2  # whole: its write ended before the wait
    second = run(tmp_path, "rerun", 2, *WARM, "--epochs", "4", "--checkpoint-dir", str(ckpt),
                 backend=backend)[0] / "fit"
    res = read_json(second / "rank0.json")
    assert res["initial_epoch"] == 2 and len(res["lrs"]) == 8
    for r in (0, 1):  # as if never stopped
        assert_same(second / f"rank{r}.npz", warm[0] / "fit" / f"rank{r}.npz", atol=1e-6)


@pytest.mark.parametrize("backend", ["tensorflow"])  # Horovod's TF ops under XLA
def test_jit_compile_true_fails_fast_with_a_clear_message(warm):
    out, _ = warm
    for r in (0, 1):  # raised out of fit on every rank, not a hang
        error = read_json(out / f"rank{r}_jit.json")["error"]
        assert error is not None and error.startswith("RuntimeError: ") and "jit_compile=False" in error, error


# On TensorFlow a slow_check: it resumed in the same order before torch's generator was checkpointed too.
@pytest.mark.parametrize("backend", [pytest.param("tensorflow", marks=pytest.mark.slow_check), "torch"])
def test_a_resumed_fit_with_shuffle_trains_on_the_uninterrupted_runs_order(tmp_path, backend):
    # Keras's torch adapter shuffles with torch's generator, and fit draws from it before its first epoch.
    args = ["--shuffle", "--epochs", "4", "--checkpoint-dir"]
    full = run(tmp_path, "full", 2, *WARM, *args, str(tmp_path / "full-ckpt"), backend=backend)[0] / "fit"
    ckpt = tmp_path / "ckpt"
    stopped_after_epoch_2(tmp_path / "full-ckpt", ckpt)
    resumed = run(tmp_path, "resumed", 2, *WARM, *args, str(ckpt), backend=backend)[0] / "fit"
    assert read_json(resumed / "rank0.json")["initial_epoch"] == 2
    for r in (0, 1):
        assert_same(resumed / f"rank{r}.npz", full / f"rank{r}.npz", atol=1e-6)


@pytest.mark.parametrize(("written_on", "resumed_on"), [("tensorflow", "torch"), ("torch", "tensorflow")])
def test_a_checkpoint_written_on_one_backend_resumes_on_the_other(tmp_path, warm_runs, written_on, resumed_on):
    # A checkpoint holds NumPy arrays in Keras's own variable order, the same on both backends.
    full, full_ckpt = warm_runs(written_on)
    ckpt = tmp_path / "ckpt"
    stopped_after_epoch_2(full_ckpt, ckpt)
    second = run(tmp_path, f"on-{resumed_on}", 2, *WARM, "--epochs", "4", "--checkpoint-dir", str(ckpt),
                 backend=resumed_on)[0] / "fit"
    res = read_json(second / "rank0.json")
    assert res["initial_epoch"] == 2 and len(res["lrs"]) == 8
    written_lrs = read_json(full / "fit" / "rank0.json")["lrs"][8:]
    assert [v for _, v in res["lrs"]] == pytest.approx([v for _, v in written_lrs])
    for r in (0, 1):  # the two backends' kernels round differently: close, not equal
        assert_same(second / f"rank{r}.npz", full / "fit" / f"rank{r}.npz", atol=1e-5)
