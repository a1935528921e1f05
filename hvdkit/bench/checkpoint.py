"""Checkpoint save/restore throughput: hvdkit's atomic, checksummed store vs plain torch.save/torch.load.

In-process, one rank, same model, same disk, the two alternating in rounds (A B, B A, ...).
hvdkit's save = serialise the snapshot straight into a temporary file through a checksumming
writer, fsync, rename, and the manifest; restore = read, verify the checksum, deserialise.
Deleting the checkpoint beyond ``keep`` runs on a background thread and is not timed (in training
it overlaps the next epoch). ``torch.save`` overwrites one file (no fsync, not atomic) and
``torch.load`` reads it. After each save and restore the page cache's dirty pages are written back,
untimed, so that neither save pays for the other's data (see ``run``).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from hvdkit.bench.rounds import order
from hvdkit.bench.stats import median, ratios


def run(megabytes: int = 256, rounds: int = 9, directory: str | None = None) -> dict:
    """Time hvdkit's checkpoint save/restore against plain torch.save/torch.load in alternating rounds.

    A round saves and restores once with each, in ``hvdkit.bench.rounds.order`` (torch first on even
    rounds, hvdkit first on odd ones); the ratios are per round (torch's time / hvdkit's time, i.e.
    hvdkit's throughput relative to torch's), with their median and IQR.
    """
    import torch

    from hvdkit.core.checkpoint_store import CheckpointStore
    from hvdkit.torch.ops import TorchOps

    side = int((megabytes * 1024 * 1024 / 4) ** 0.5)
    torch.manual_seed(0)
    model = torch.nn.Linear(side, side, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ops = TorchOps(model, opt)
    nbytes = side * side * 4
    res: dict[str, list[float]] = {"torch_save": [], "torch_load": [], "hvdkit_save": [], "hvdkit_load": []}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        plain = Path(tmp) / "plain.pt"
        store = CheckpointStore(Path(tmp) / "store", keep=1)

        def plain_round(i: int) -> None:
            t0 = time.perf_counter()
            torch.save(ops.capture(), plain)
            res["torch_save"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(plain, weights_only=False)
            res["torch_load"].append(time.perf_counter() - t0)

        def hvdkit_round(i: int) -> None:
            # Both paths replace the previous checkpoint each time: torch.save overwrites
            # plain.pt, the store (keep=1) prunes the older one after writing the new one.
            t0 = time.perf_counter()
            snap = ops.capture()

            tree, write = ops.dump(snap)
            store.save(write, state=tree, epoch=i, global_step=i, world_size=1, framework="torch")
            res["hvdkit_save"].append(time.perf_counter() - t0)
            # The previous checkpoint is deleted on a background thread (it overlaps training);
            # wait here, outside the timings, so it does not slow the next measurement.
            store.flush()
            t0 = time.perf_counter()
            found = store.latest()
            assert found is not None
            ops.loads(found.state, found.data)
            res["hvdkit_load"].append(time.perf_counter() - t0)

        for i in range(rounds):
            for fn in order((plain_round, hvdkit_round), i):
                fn(i)
                # Write back what a save left dirty, untimed: torch.save does not fsync, and ext4 (data=ordered)
                # flushes the file it rewrote at the next journal commit, i.e. inside the next fsync, hvdkit's.
                # Without this, hvdkit's save took ~1.0 s right after torch's and ~0.67 s after its own.
                os.sync()
    med = {k: median(v) for k, v in res.items()}
    mb = nbytes / 1e6
    return {"model_mb": mb, "rounds": rounds, "seconds": med, "mb_per_s": {k: mb / v for k, v in med.items()},
            "save_ratios": ratios(res["torch_save"], res["hvdkit_save"]),
            "load_ratios": ratios(res["torch_load"], res["hvdkit_load"]), "times": res}


#: Training steps per mode in a full stall round (a save every 4: 12 save windows); ``--quick`` runs half.
STALL_STEPS = 48

#: The stall's modes: no save, a blocking ``torch.save``, hvdkit's async save with the process on one core
#: (judged), and the same with the process free to use every core it may (reported).
STALL_MODES = ("none", "blocking", "async", "async_spare_core")


def stall(megabytes: int = 256, rounds: int = 5, steps: int = STALL_STEPS, every: int = 4,
          directory: str | None = None) -> dict:
    """Training stall per save: hvdkit's asynchronous checkpoint against a blocking ``torch.save``.

    One process trains a ``megabytes`` linear model (batch 16, one intra-op thread, as each of two
    ranks on two cores would). A round times ``steps`` training steps four ways: with no save; with a
    blocking ``torch.save(state_dict)`` to a file (fsynced) every ``every`` steps; and with hvdkit's
    ``Checkpoint(async_save=True)`` path (copy to host memory, then serialise + checksum + fsync + atomic
    rename on a background thread) every ``every`` steps, twice:

    - ``async`` (judged): the process, its copy and writer threads included, on **one core**, the share
      of the machine one rank of a job that fills its cores has. The save's CPU time (staging copy,
      serialising, checksum, the copy into the page cache) then comes out of the training's, as it does
      in such a job, on a quiet machine or a busy one alike;
    - ``async_spare_core`` (reported): the threads free to use every core the process may. On an idle
      2-core machine the save runs on the core the training does not use, and the stall is only what the
      two cores' shared memory traffic costs; beside other work no core is spare, and the stall grows
      to the ``async`` figure. The full runs of docs/benchmarks.md measured both: 0.106 quiet against
      0.232 beside a CPU burner, verdicts that differ with the machine's state, not with hvdkit.

    Modes that do not use the spare core run on the process's first allowed CPU (threads inherit the
    affinity of the thread that starts them); with one CPU allowed the two async modes are the same.
    The modes alternate window by window, a window
    being the ``every`` steps that follow one save (A B C D, then D C B A, ...): a machine whose speed drifts
    over seconds then slows the four alike, which whole 12 s rounds per mode did not (on this project's
    VM the async stall measured that way came out negative in 4 rounds of 5: a round with six async saves
    ran faster than the round with none). An async
    window ends when its write is durable: the write, run beside the window's steps as it would beside
    training, is counted in it and never runs into another mode's window. As in the callback, a save
    first waits for the previous write, and the snapshot is staged (``capture_staged``: host buffers
    reused from the previous save, parameters copied while the next step's forward and backward run).
    The stall of a save is the round's time in that mode minus its time with no save, divided by the saves
    in it; ``async_over_blocking`` holds the per-round ratios of the ``async`` and blocking stalls and
    ``spare_core_async_over_blocking`` those of ``async_spare_core``. A round holds 12 windows
    per mode: with 6, a round's ratio rested on a difference of two 13 s sums that the machine's noise moves
    by about 0.1 s per save, and the rounds of one quiet run spread from 0.05 to 0.20 around a median of
    0.15, across the 0.10 target. ``every`` steps (2 s at
    256 MB here) are longer than a background write of the store's steady state (0.13-0.36 s), so the
    write overlaps training as it would between epochs. The first ``keep + 1`` = 2 saves of the run create
    files, later ones overwrite a pruned one (``hvdkit.core.checkpoint_store``); they fall in the first
    round.
    """
    import torch

    from hvdkit.core.background_save import BackgroundSave
    from hvdkit.core.checkpoint_store import CheckpointStore
    from hvdkit.torch.ops import TorchOps

    torch.set_num_threads(1)
    side = int((megabytes * 1024 * 1024 / 4) ** 0.5)
    torch.manual_seed(0)
    model = torch.nn.Linear(side, side, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    ops = TorchOps(model, opt)
    x = torch.randn(16, side)

    def step() -> None:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    allowed = os.sched_getaffinity(0)
    one_core = {min(allowed)}
    times: dict[str, list[float]] = {mode: [] for mode in STALL_MODES}
    # Where a mode's time went (all rounds): the training thread's own CPU, and the wait for the write at the
    # end of an async window (the write outlasting the window's steps).
    where = {mode: {"train_cpu": 0.0, "tail_wait": 0.0} for mode in STALL_MODES}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        plain = Path(tmp) / "plain.pt"
        store = CheckpointStore(Path(tmp) / "store", keep=1)
        writer = BackgroundSave()

        def blocking() -> None:
            with open(plain, "wb") as f:
                torch.save(model.state_dict(), f)
                f.flush()
                os.fsync(f.fileno())

        writer_cpus: dict[str, set[int]] = {"async": set(), "async_spare_core": set()}

        def background(i: int, mode: str) -> None:
            snap = ops.capture_staged()  # as Checkpoint(async_save=True) does

            def write() -> None:
                writer_cpus[mode].add(len(os.sched_getaffinity(0)))  # the cores the writer thread may use
                tree, payload = ops.dump(snap)
                store.save(payload, state=tree, epoch=i, global_step=i, world_size=1, framework="torch")
            writer.submit(write)

        saves = -(-steps // every)
        step()  # warm-up
        try:
            for r in range(rounds):
                spent = dict.fromkeys(times, 0.0)
                for w in range(saves):  # one window of `every` steps per mode, the modes alternating window by window
                    for mode in order(STALL_MODES, r * saves + w):
                        os.sched_setaffinity(0, allowed if mode == "async_spare_core" else one_core)  # this thread
                        t0, c0 = time.perf_counter(), time.thread_time()
                        for s in range(min(every, steps - w * every)):
                            if s == 0 and mode == "blocking":
                                blocking()
                            elif s == 0 and mode.startswith("async"):
                                writer.wait()  # as Checkpoint.save: one write in flight, then the snapshot
                                background(r * saves + w, mode)
                            step()
                        t1 = time.perf_counter()
                        if mode.startswith("async"):
                            writer.wait()  # the write counts in its own window, never in another mode's
                        spent[mode] += time.perf_counter() - t0
                        where[mode]["train_cpu"] += time.thread_time() - c0
                        where[mode]["tail_wait"] += time.perf_counter() - t1
                        store.flush()  # pruning runs on a background thread, untimed (in training it overlaps)
                for mode, t in spent.items():
                    times[mode].append(t)
        finally:  # this thread and those it starts later: every core the process may use again
            os.sched_setaffinity(0, allowed)
    stalls = {m: [(t - n) / saves for t, n in zip(times[m], times["none"])] for m in STALL_MODES[1:]}
    return {"model_mb": side * side * 4 / 1e6, "rounds": rounds, "steps": steps, "saves_per_round": saves,
            "cpus": len(allowed), "writer_cpus": {m: sorted(v) for m, v in writer_cpus.items()},
            "step_s": median(times["none"]) / steps,
            # per save, all rounds: how much more CPU the training thread used than with no save, how much
            # of the stall it was off the CPU (other threads on its core, I/O), the wait for the write's end
            "per_save_breakdown_s": {m: {"train_cpu_extra": (where[m]["train_cpu"] - where["none"]["train_cpu"])
                                         / (saves * rounds),
                                         "off_cpu_extra": (sum(times[m]) - where[m]["train_cpu"] - sum(times["none"])
                                                           + where["none"]["train_cpu"]) / (saves * rounds),
                                         "tail_wait": where[m]["tail_wait"] / (saves * rounds)}
                                     for m in STALL_MODES[1:]},
            "stall_s": {m: median(v) for m, v in stalls.items()},
            "async_over_blocking": ratios(stalls["async"], stalls["blocking"]),
            "spare_core_async_over_blocking": ratios(stalls["async_spare_core"], stalls["blocking"])}
