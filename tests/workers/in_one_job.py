"""Several worker scripts, one after another, in the same ranks of one horovodrun job: a group of small tests
pays for one launch (each rank imports the framework once) and each test reads its own script's output.

    in_one_job.py OUT SCRIPT [ARG...] [--- SCRIPT [ARG...]]...

The K-th SCRIPT (a file in tests/workers/) runs as ``__main__`` with its ARGs as ``sys.argv[1:]``; what it
prints goes to ``OUT/K-SCRIPT.rankR.out`` (its Python-level stderr, warnings and log records included, to
``.err``), and ``OUT/K-SCRIPT.rankR.done`` marks that it returned. A script that raises leaves its traceback
in ``OUT/K-SCRIPT.rankR.error`` and ends the job: its peer may be inside a collective this rank never starts,
so no later script could run in step.
"""

import contextlib
import os
import runpy
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
out = Path(sys.argv[1])
rank = os.environ.get("HOROVOD_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
scripts: list[list[str]] = [[]]
for arg in sys.argv[2:]:
    if arg == "---":
        scripts.append([])
    else:
        scripts[-1].append(arg)

for k, (script, *args) in enumerate(scripts):
    stem = out / f"{k}-{script}.rank{rank}"
    sys.argv = [str(HERE / script), *args]
    failed = None
    with open(f"{stem}.out", "w") as f, open(f"{stem}.err", "w") as e, contextlib.redirect_stdout(f), \
            contextlib.redirect_stderr(e):
        try:
            runpy.run_path(str(HERE / script), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                failed = traceback.format_exc()
        except BaseException:
            failed = traceback.format_exc()
    if failed:
        Path(f"{stem}.error").write_text(failed)
        print(f"in_one_job: {script} failed on rank {rank}:\n{failed}", file=sys.stderr, flush=True)
        os._exit(1)
    Path(f"{stem}.done").touch()
