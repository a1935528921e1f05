"""Elastic ``horovodrun`` on one machine, without the hangs (``hvdkit elastic-local``).

On one host Horovod's elastic driver waits forever for a NIC without ``--network-interface``, and
blacklisting the only host after a failure ends the job. So the machine is named twice (``localhost``
and ``127.0.0.1``) in a hosts file the discovery script prints; edit it while the job runs to remove or
re-add a "host". It runs

    horovodrun -np N --min-np M --max-np N --network-interface lo \\
        --host-discovery-script SCRIPT COMMAND...
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
import tempfile
from pathlib import Path

HOSTS = ("localhost", "127.0.0.1")


def write_discovery(directory: str | os.PathLike[str], slots_per_host: int = 1,
                    hosts: tuple[str, ...] = HOSTS) -> tuple[Path, Path]:
    """Write ``hosts.txt`` and an executable ``discover.sh`` that prints it; return both paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    hosts_file = d / "hosts.txt"
    hosts_file.write_text("".join(f"{h}:{slots_per_host}\n" for h in hosts))
    script = d / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {shlex.quote(str(hosts_file))}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return hosts_file, script


def command(np: int, min_np: int, script: Path, cmd: list[str], extra: list[str] | None = None) -> list[str]:
    """The ``horovodrun`` command line for an elastic job on this machine."""
    if np < 1 or min_np < 1 or min_np > np:
        raise ValueError(f"np and min_np must satisfy 1 <= min_np <= np, got np={np}, min_np={min_np}")
    return ["horovodrun", "-np", str(np), "--min-np", str(min_np), "--max-np", str(np), "--network-interface", "lo",
            "--host-discovery-script", str(script), *(extra or []), *cmd]


def main(argv: list[str]) -> int:
    """``hvdkit elastic-local``: write the discovery files and exec horovodrun."""
    import argparse

    p = argparse.ArgumentParser(prog="hvdkit elastic-local", description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--min-np", type=int, default=1)
    p.add_argument("--dir", help="where hosts.txt and discover.sh go (default: a new temporary folder)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- python train.py ...")
    args = p.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        p.error("give the training command after --")
    d = Path(args.dir or tempfile.mkdtemp(prefix="hvdkit-elastic-"))
    slots = -(-args.np // len(HOSTS))
    hosts_file, script = write_discovery(d, slots)
    print(f"[elastic-local] hosts file (edit to remove/add hosts): {hosts_file}", file=sys.stderr, flush=True)
    full = command(args.np, args.min_np, script, cmd)
    os.execvp(full[0], full)
    return 0  # pragma: no cover
