"""A watchdog's exit (hang report, start watch, stop grace) takes the process's children with it: ``os._exit``
alone skips multiprocessing's atexit hook, and a DataLoader worker stuck on a read outlived the job."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import multiprocessing, subprocess, sys, threading, time
    from hvdkit.core.exit_now import child_pids, exit_now

    def stuck():  # a DataLoader worker waiting on a read that never returns
        time.sleep(10 ** 6)

    if __name__ == "__main__":
        worker = multiprocessing.Process(target=stuck, daemon=True)
        worker.start()
        tool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10 ** 6)"])
        assert sorted(child_pids()) == sorted([worker.pid, tool.pid]), (child_pids(), worker.pid, tool.pid)
        print(worker.pid, tool.pid, flush=True)
        threading.Thread(target=exit_now, args=(7,)).start()  # from a thread, as the watchdogs do
        time.sleep(10 ** 6)  # the main thread stays stuck
""")


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"  # a zombie has ended; only its parent's wait is missing


@pytest.mark.timeout(60)
def test_exit_now_kills_the_children_then_exits_with_the_code():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    pids = [int(p) for p in proc.stdout.readline().split()]  # not to the end: a child left alive holds the pipe
    try:
        assert proc.wait(timeout=30) == 7, proc.stderr.read()
        assert len(pids) == 2
        deadline = time.monotonic() + 10  # SIGKILL was sent before the exit; its delivery is the kernel's
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), pids
    finally:
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.kill()
        proc.communicate()
