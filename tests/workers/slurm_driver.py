"""Submit one sbatch job on the namespace Slurm cluster, follow its output, and report as JSON.

Runs inside docker/slurm/slurm-cluster.sh (the controller's namespace, SLURM_CONF set):

    python tests/workers/slurm_driver.py --out DIR [--lose node2 --lose-when 'epoch +3/'] SCRIPT ARGS...
    python tests/workers/slurm_driver.py --out DIR --signal USR1 --signal-when 'epoch +2/' SCRIPT ARGS...

Every output line is stamped with the time it appeared (the file is read every 0.1 s), so the report
has job start -> first line of training, and node loss -> resumed training. With --lose, the node dies
(docker/slurm/lose-node.sh) once a line matches the pattern; with --signal, `scancel --signal` sends the
signal to the job's steps once, as `#SBATCH --signal=USR1@60` does before the time limit. The job's end is read from
`scontrol show job` (final states only; a requeued job goes on). Every wait has a deadline.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}
REPO = Path(__file__).resolve().parents[2]


def job_fields(job: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=30).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--lose")
    p.add_argument("--lose-when")
    p.add_argument("--signal")
    p.add_argument("--signal-when")
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "job.out"
    submitted = time.time()
    sub = subprocess.run(["sbatch", "--parsable", "-o", str(log), a.script, *a.args], capture_output=True,
                         text=True, timeout=60)
    if sub.returncode != 0:
        print(json.dumps({"error": f"sbatch failed: {sub.stderr.strip()}"}))
        return 1
    job = sub.stdout.strip().split(";")[0]
    lines: list[tuple[float, str]] = []
    pos, partial = 0, ""
    lost_at = signalled_at = None
    states: list[tuple[float, str]] = []
    deadline = submitted + a.timeout
    fields: dict[str, str] = {}
    while time.time() < deadline:
        now = time.time()
        if log.exists():
            with open(log, encoding="utf-8", errors="replace") as f:
                f.seek(pos)
                chunk = f.read()
                pos = f.tell()
            partial += chunk
            *done, partial = partial.split("\n")
            for line in done:
                lines.append((now, line))
                if a.lose and lost_at is None and re.search(a.lose_when, line):
                    subprocess.run([str(REPO / "docker/slurm/lose-node.sh"), a.lose], check=True, timeout=30)
                    lost_at = time.time()
                if a.signal and signalled_at is None and re.search(a.signal_when, line):
                    subprocess.run(["scancel", f"--signal={a.signal}", job], check=True, timeout=30)
                    signalled_at = time.time()
        fields = job_fields(job)
        state = fields.get("JobState", "?")
        if not states or states[-1][1] != state:
            states.append((now, state))
        if state in FINAL:
            break
        time.sleep(0.1)  # the sampling period of this observer, not a synchronisation
    else:
        fields = {**fields, "JobState": "DRIVER_TIMEOUT"}
    if log.exists():  # the rest of the file after the job ended
        rest = partial + log.read_text(errors="replace")[pos:]
        lines += [(time.time(), line) for line in rest.split("\n") if line]
    print(json.dumps({"job": job, "submitted": submitted, "state": fields.get("JobState"),
                      "exit_code": fields.get("ExitCode"), "restarts": int(fields.get("Restarts", "0") or 0),
                      "nodes": fields.get("NodeList"), "reason": fields.get("Reason"),
                      "begin": fields.get("BeginTime"), "num_nodes": fields.get("NumNodes"), "lost_at": lost_at,
                      "signalled_at": signalled_at,
                      "states": states, "lines": lines}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
