"""One horovodrun job for the small torch tests whose workers need nothing but ``-np 2``
(tests/workers/in_one_job.py runs their scripts one after another in the same two ranks)."""

from __future__ import annotations

import pytest
from helpers import horovodrun

# vocabulary_events first: it records DeprecationWarnings, none of which another script may have raised before.
IN_ONE_JOB = [("vocabulary_events.py", "torch"), ("broadcast_structure.py",), ("compression.py",), ("accumulate.py",)]
# The scripts' own limits were 75-200 s each; under load the job's parts add up. The tests that read the job
# allow 480 s: whichever runs first waits for it.
JOB_TIMEOUT = 420


@pytest.fixture(scope="session")
def torch_job(tmp_path_factory):
    """``output(script)``: both ranks' printed output of that script in the shared job (rank 0's first);
    raises, naming the script, when it did not return on both ranks."""
    out = tmp_path_factory.mktemp("torch-job")
    args: list[str] = []
    for k, spec in enumerate(IN_ONE_JOB):
        args += (["---"] if k else []) + list(spec)
    proc = horovodrun("in_one_job.py", str(out), *args, timeout=JOB_TIMEOUT, check=False)

    def output(script: str) -> str:
        [k] = [k for k, spec in enumerate(IN_ONE_JOB) if spec[0] == script]
        stem = f"{k}-{script}"
        if sorted(p.name for p in out.glob(f"{stem}.rank*.done")) != [f"{stem}.rank0.done", f"{stem}.rank1.done"]:
            errors = "\n".join(p.read_text() for p in sorted(out.glob(f"{stem}.rank*.error")))
            raise AssertionError(f"{script} did not finish on both ranks of the shared job (exit status "
                                 f"{proc.returncode})\n{errors}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n"
                                 f"{proc.stderr[-4000:]}")
        return "".join((out / f"{stem}.rank{r}.out").read_text() for r in (0, 1))

    return output
