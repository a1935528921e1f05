"""Checkpoint save/restore throughput and the async-save stall (``hvdkit.bench.checkpoint``), as a job.

    python -m hvdkit.bench.workers.checkpoint --megabytes 256 --rounds 15 --stall-rounds 5 --stall-steps 48 \
        --results r.json

The ``checkpoint`` suite runs this as a job of its own, in a session of its own, like every other suite's
jobs: with autogroup a session's nice value is what competes with other sessions' work, so run inside the
driver (in the caller's session) it would not get the bench's priority (``hvdkit.bench.priority``).
"""

from __future__ import annotations

import argparse

from hvdkit.bench.checkpoint import STALL_STEPS, run, stall
from hvdkit.bench.workers.common import positive, write_result


def main() -> None:
    """Time save/restore, then the stall per save; write both."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", required=True)
    p.add_argument("--megabytes", type=positive, default=256, help="the model's size")
    p.add_argument("--rounds", type=positive, default=15, help="save/restore rounds (torch and hvdkit alternating)")
    p.add_argument("--stall-rounds", type=positive, default=5,
                   help="stall rounds (no save, blocking, async on one core, async with a spare core)")
    p.add_argument("--stall-steps", type=positive, default=STALL_STEPS, help="training steps per mode in a stall "
                   "round (a save every 4)")
    args = p.parse_args()
    write_result(args.results, {"result": run(megabytes=args.megabytes, rounds=args.rounds),
                                "stall": stall(megabytes=args.megabytes, rounds=args.stall_rounds,
                                              steps=args.stall_steps)})


if __name__ == "__main__":
    main()
