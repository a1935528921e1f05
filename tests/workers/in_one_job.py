"""Several worker scripts, one after another, in the same ranks of one horovodrun job: a group of small tests
pays for one launch (each rank imports the framework once) and each test reads its own script's output.

    in_one_job.py OUT SCRIPT [ARG...] [--- SCRIPT [ARG...]]...

The K-th SCRIPT (a path relative to tests/workers/, or absolute) runs as ``__main__`` with its ARGs as
``sys.argv[1:]`` and its folder on ``sys.path``, as ``python SCRIPT`` has it. What it writes to file
descriptors 1 and 2 (C++ and ``tf.print`` output included) goes to ``OUT/K-NAME.rankR.out`` and ``.err``
(NAME: the script's file name), and ``OUT/K-NAME.rankR.done`` marks that it returned. A script that raises
leaves its traceback in ``OUT/K-NAME.rankR.error`` and ends the job: its peer may be inside a collective this
rank never starts, so no later script could run in step. tests/helpers.py's ``SharedJob`` builds the command
line and reads the files.
"""

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

saved = os.dup(1), os.dup(2)
for k, (script, *args) in enumerate(scripts):
    path = HERE / script  # an absolute script stays as it is
    stem = out / f"{k}-{path.name}.rank{rank}"
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.parent))
    failed = None
    with open(f"{stem}.out", "w") as f, open(f"{stem}.err", "w") as e:
        # file descriptors, not sys.stdout: TensorFlow's tf.print and C++ logs write to fds 1 and 2
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(f.fileno(), 1), os.dup2(e.fileno(), 2)
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                failed = traceback.format_exc()
        except BaseException:
            failed = traceback.format_exc()
        finally:
            sys.path.remove(str(path.parent))
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
    if failed:
        Path(f"{stem}.error").write_text(failed)
        print(f"in_one_job: {script} failed on rank {rank}:\n{failed}", file=sys.stderr, flush=True)
        os._exit(1)
    Path(f"{stem}.done").touch()
