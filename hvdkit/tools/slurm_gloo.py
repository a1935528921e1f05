"""``hvdkit slurm-gloo COMMAND...``: a Gloo-only Horovod job over a Slurm allocation, no MPI.

Run it in the batch script (or an ``salloc`` shell). Like ``horovodrun``'s Gloo launcher with Slurm in
place of ssh, it starts Horovod's rendezvous server on this node, sized from the allocation, then runs
``srun --distribution=block COMMAND`` with ``HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT`` set; each task's
``init()`` maps the ``SLURM_*`` variables to Horovod's (:mod:`hvdkit.runtime.environments`). The server
listens before any task starts: Horovod's HTTP store gives up after 3 tries 0.5 s apart.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys

from hvdkit.runtime import gloo
from hvdkit.runtime.environments import slurm


def rendezvous_address(env: dict[str, str]) -> str:
    """This node's address as the other nodes reach it (its Slurm node name, resolved)."""
    name = env.get("SLURMD_NODENAME") or socket.gethostname()
    return socket.gethostbyname(name)


def _srun_args(env: dict[str, str]) -> list[str]:
    """``HVDKIT_SRUN_ARGS`` split as a shell would."""
    text = env.get("HVDKIT_SRUN_ARGS", "")
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"HVDKIT_SRUN_ARGS must be srun options as a shell would split them, got {text!r} "
                         f"({exc})") from None


def main(argv: list[str]) -> int:
    """Start the rendezvous server, run the srun step, return its exit status."""
    env = dict(os.environ)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if not slurm.in_allocation(env):
        print("hvdkit slurm-gloo: not inside a Slurm allocation (SLURM_JOB_ID is not set); run it from an "
              "sbatch script or an salloc shell", file=sys.stderr)
        return 2
    try:
        plan = slurm.allocation_plan(env)
        extra = _srun_args(env)
    except ValueError as exc:  # the allocation's variables or HVDKIT_SRUN_ARGS: say which, start nothing
        print(f"hvdkit slurm-gloo: {exc}", file=sys.stderr)
        return 2
    from horovod.runner.http.http_server import RendezvousServer

    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(plan)
    summary = gloo.summary(plan)
    env.update({
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous_address(env),
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HVDKIT_GLOO_PLAN": summary,
        "PYTHONUNBUFFERED": "1",
    })
    cmd = ["srun", "--distribution=block", f"--ntasks={len(plan)}", "--kill-on-bad-exit=1", *extra, *argv]
    print(f"hvdkit slurm-gloo: {len(plan)} ranks on {summary}, rendezvous "
          f"{env['HOROVOD_GLOO_RENDEZVOUS_ADDR']}:{port}: {' '.join(cmd)}", flush=True)
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    try:
        return proc.wait()
    finally:
        server.stop()

