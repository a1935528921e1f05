"""One horovodrun job for the torch tests whose workers need nothing but ``-np 2``
(tests/workers/in_one_job.py runs their scripts one after another in the same two ranks)."""

from __future__ import annotations

import pytest
from helpers import SharedJob

# 4 epochs with warm-up over 2 (test_torch_training.py): the LR test's run and the resume test's reference
WARMUP = ("--batch", "8", "--momentum", "0.9", "--warmup-epochs", "2", "--lr", "0.2")
# label: the script and its arguments ({out}: the job's folder). vocabulary_events first: it records
# DeprecationWarnings, none of which another script may have raised before.
IN_ONE_JOB = {
    "vocabulary": ("vocabulary_events.py", "torch"),
    "broadcast_structure": ("broadcast_structure.py",),
    "compression": ("compression.py",),
    "accumulate": ("accumulate.py",),
    # 64 rows, 4 per rank and step: 8 steps per epoch; rank 1's loss is NaN at step 20 (epoch 2)
    "nonfinite": ("numerics_torch.py", "--policies", "default,skip,warn", "--checkpoint-dir", "{out}/nonfinite",
                  "--nan-rank", "1", "--nan-step", "20", "--keep", "2"),
    # the same, rank 1's loss NaN with finite gradients (a NaN term that does not depend on the weights)
    "nonfinite_loss": ("numerics_torch.py", "--policies", "default,skip", "--checkpoint-dir", "{out}/nonfinite_loss",
                       "--nan-rank", "1", "--nan-step", "20", "--nan-in", "loss", "--keep", "2"),
    "uninterrupted": ("torch_train.py", "--results", "{out}/uninterrupted", *WARMUP, "--epochs", "4",
                      "--checkpoint-dir", "{out}/uninterrupted-ckpt"),
    "two_ranks": ("torch_train.py", "--results", "{out}/two_ranks", "--batch", "8", "--epochs", "3",
                  "--model-seed-per-rank"),
    "memory_format": ("memory_format.py", "{out}"),
    "optimizer_api": ("optimizer_api.py",),
    "compiled": ("compiled.py",),  # last: Inductor compiles for tens of seconds
}
# The scripts' own limits were 75-240 s each; under load the job's parts add up. The tests that read the job
# allow 480 s: whichever runs first waits for it.
JOB_TIMEOUT = 420


@pytest.fixture(scope="session")
def torch_job(tmp_path_factory):
    """``torch_job(label)``: that script's run in the shared job (helpers.SharedJob); ``torch_job.folder`` is
    the job's folder ({out})."""
    out = tmp_path_factory.mktemp("torch-job")
    for label in ("uninterrupted", "two_ranks"):  # torch_train.py writes into an existing --results folder
        (out / label).mkdir()
    return SharedJob(out, IN_ONE_JOB, timeout=JOB_TIMEOUT)
