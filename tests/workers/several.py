"""Several worker scripts one after the other in one process, so that one launch (and one framework import
per rank) serves several tests:

    horovodrun ... python several.py SCRIPT [ARG ...] [-- SCRIPT [ARG ...]] ...

Each script (a path relative to tests/workers, or absolute) runs as ``__main__`` with its own ``sys.argv``.
An exception in one is printed and the next one runs; the process exits 1 if any raised, naming them (file
names). The scripts must print tags (or keys) that tell their lines apart.
"""

import runpy
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
runs = [[]]
for arg in sys.argv[1:]:
    if arg == "--":
        runs.append([])
    else:
        runs[-1].append(arg)
failed = []
for script, *args in runs:
    path = str(HERE / script)  # an absolute script stays as it is
    sys.argv = [path, *args]
    sys.path.insert(0, str(Path(path).parent))  # as ``python SCRIPT`` has it: its folder's modules import
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            failed.append(Path(script).name)
    except Exception:
        traceback.print_exc()
        failed.append(Path(script).name)
    finally:
        sys.path.remove(str(Path(path).parent))
if failed:
    print(f"several.py: {', '.join(failed)} failed", file=sys.stderr, flush=True)
sys.exit(1 if failed else 0)
