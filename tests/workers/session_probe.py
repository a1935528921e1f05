"""Run by netns-cluster.sh on every worker, under mpirun: where is this rank's Open MPI session directory?

Prints "session-probe ADDR: PATH device=N"; PATH is the session directory Open MPI gives this rank
(OMPI_FILE_LOCATION), N the file system it is on (the workers see the same paths, so only the device
tells a node's own tmpfs from the machine's shared /tmp). The test reads the lines.
"""

from __future__ import annotations

import os
import subprocess


def main() -> None:
    mine = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=30).stdout.split()
    location = os.environ.get("OMPI_FILE_LOCATION", "")
    device = os.stat(location).st_dev if location and os.path.isdir(location) else None
    print(f"session-probe {mine[0] if mine else '?'}: {location} device={device}", flush=True)


if __name__ == "__main__":
    main()
