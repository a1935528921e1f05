"""What the elastic test workers (torch_elastic.py, keras_elastic.py) share: arguments, the per-step
record, the failures they inject (SIGKILL, a host removed and put back) and the summary.

Each rank appends one JSON line per step (its samples, LR, and a digest of the weights it began from) to
<results>/steps-rank<r>-pid<pid>.jsonl (line-buffered, so a SIGKILLed worker's steps survive); rank 0 writes
summary.json.
"""

import argparse
import hashlib
import json
import os
import signal
import time


def digest(arrays):
    """A digest of the model's weights (numpy arrays): equal only for identical weights."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--results", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--samples", type=int, default=96)
    p.add_argument("--lr", type=float, default=0.05, help="single-worker LR")
    p.add_argument("--commit-every", type=int, default=5)
    p.add_argument("--warmup-epochs", type=float, default=0)
    p.add_argument("--kill-at-step", type=int, default=-1, help="rank 1 SIGKILLs itself at this global step")
    p.add_argument("--hosts-file")
    p.add_argument("--remove-at-step", type=int, default=-1, help="rank 0 removes 127.0.0.1 from the hosts file")
    p.add_argument("--add-back", action="store_true", help="after the removal, rank 0 puts the host back and waits")
    p.add_argument("--add-at-step", type=int, default=-1,
                   help="rank 0 of a one-worker job adds 127.0.0.1 to the hosts file at this global step")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--step-seconds", type=float, default=0,
                   help="each step takes at least this long and rank 0 prints '[step] N size S' (for tests that "
                        "change the hosts while the job runs)")
    return p.parse_args()


class StepProtocol:
    def __init__(self, args, rank):
        self.args = args
        self.events: dict = {}
        self.log = open(os.path.join(args.results, f"steps-rank{rank}-pid{os.getpid()}.jsonl"), "a", buffering=1)

    def step_done(self, step, epoch, batch, size, rank, lr, samples, weights):
        """``weights``: a digest of the model's weights when the step began."""
        args, events = self.args, self.events
        self.log.write(json.dumps({"step": step, "epoch": epoch, "batch": batch, "size": size, "rank": rank,
                                   "lr": lr, "samples": samples, "weights": weights}) + "\n")
        if args.step_seconds:
            time.sleep(args.step_seconds)
            if rank == 0:
                print(f"[step] {step} size {size}", flush=True)
        if step == args.kill_at_step and rank == 1 and size == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == 0 and step == args.remove_at_step and size == 2:
            with open(args.hosts_file, "w") as f:
                f.write("localhost:1\n")
            events["removed_at"] = step
            events["waiting_for"] = 1
        if rank == 0 and step == args.add_at_step and size == 1:
            with open(args.hosts_file, "w") as f:
                f.write("localhost:1\n127.0.0.1:1\n")
            events["added_at"] = step
            events["waiting_for"] = 2
        # Horovod's driver polls the discovery script about once a second and the change lands at
        # the next commit: while a requested change is pending, rank 0 slows its steps (bounded by
        # the number of steps left) so that the run does not end first.
        if events.get("waiting_for") is not None:
            if size == events["waiting_for"] and not (args.add_back and size == 1):
                events["waiting_for"] = None
            else:
                time.sleep(0.05)

    def reset(self, state):
        self.events.setdefault("resets", []).append({"size": state.comm.size, "step": state.global_step,
                                                     "epoch": state.epoch, "batch": state.batch})
        if self.args.add_back and state.comm.rank == 0 and state.comm.size == 1:
            with open(self.args.hosts_file, "w") as f:
                f.write("localhost:1\n127.0.0.1:1\n")
            self.events["waiting_for"] = 2

    def summary(self, state, progress, epochs_run, resumed_from, history, t0):
        out = {"epochs_run": epochs_run, "final_epoch": state.epoch, "size": state.comm.size,
               "global_step": state.global_step, "resets": progress.resets,
               "recovery_seconds": progress.recovery_seconds, "events": self.events, "history": history,
               "resumed_from": resumed_from, "wall_seconds": time.monotonic() - t0}
        with open(os.path.join(self.args.results, "summary.json"), "w") as f:
            json.dump(out, f)
        print("recovery seconds:", out["recovery_seconds"], flush=True)
