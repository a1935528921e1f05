"""Allreduce bus bandwidth at 2 processes: hvdkit, raw Horovod (MPI and Gloo), torch.distributed (gloo) and
mpi4py's own MPI Allreduce over message sizes, the jobs alternating in rounds; fp16 compression against none
paired inside one job."""

from __future__ import annotations

from functools import partial

from benchmarks.jobs import Log, Result, alternate, run_worker
from benchmarks.stats import median, quartiles, ratios, summary, target

AR = "benchmarks.workers.allreduce"


def run(quick: bool, rounds: int, log: Log) -> Result:
    """Allreduce bandwidth of hvdkit, raw Horovod, torch.distributed and mpi4py over the message sizes."""
    sizes = ["--max-mib", "16" if quick else "256"]
    launch = {
        "hvdkit (MPI, hvdkit defaults)": ("horovodrun", ["--impl", "hvdkit"]),
        "horovod (MPI)": ("horovodrun", ["--impl", "horovod"]),
        "horovod (Gloo)": ("horovodrun-gloo", ["--impl", "horovod"]),
        "torch.distributed (gloo)": ("torchrun", ["--impl", "torch_gloo"]),
        "mpi4py (Open MPI)": ("mpirun", ["--impl", "mpi4py"]),
    }
    # Each job times every size once (one burst per size); the rounds alternate the jobs.
    jobs = {name: partial(run_worker, launcher, 2, AR, [*a, *sizes, "--rounds", "1"])
            for name, (launcher, a) in launch.items()}
    per, ran = alternate(jobs, rounds, log)
    nbytes = [x["bytes"] for x in per["horovod (MPI)"][0]["rows"]]

    def bw(name: str, i: int) -> list[float]:
        return [job["rows"][i]["busbw_gbps"] for job in per[name]]

    rows = {name: [{"bytes": b, "busbw_gbps": median(bw(name, i)), "busbw_iqr": quartiles(bw(name, i))}
                   for i, b in enumerate(nbytes)] for name in launch}
    log(f"hvdkit fp16 compression vs none, {rounds} rounds alternating in one job")
    paired = run_worker("horovodrun", 2, AR, ["--impl", "hvdkit", "--paired-fp16", *sizes, "--rounds", str(rounds)])
    fp16 = [r["busbw_rounds"] for r in paired["rows_fp16"]]
    none = [r["busbw_rounds"] for r in paired["rows"]]
    rows["hvdkit (MPI, fp16 compression)"] = [{"bytes": b, "busbw_gbps": median(f), "busbw_iqr": quartiles(f)}
                                              for b, f in zip(nbytes, fp16)]
    ours, raw, gloo = "hvdkit (MPI, hvdkit defaults)", "horovod (MPI)", "torch.distributed (gloo)"
    table = [{"bytes": b, "vs_horovod": summary(ratios(bw(ours, i), bw(raw, i))),
              "vs_torch_gloo": summary(ratios(bw(ours, i), bw(gloo, i))),
              "fp16_vs_none": summary(ratios(fp16[i], none[i]))} for i, b in enumerate(nbytes)]
    big = [i for i, b in enumerate(nbytes) if b >= 1 << 20]

    def worst(key: str) -> list[float]:  # per round, the lowest ratio over the buffers >= 1 MiB
        return [min(table[i][key]["values"][r] for i in big) for r in range(len(table[0][key]["values"]))]

    def mid(key: str) -> list[float]:  # per round, the median ratio over the buffers >= 1 MiB
        return [median([table[i][key]["values"][r] for i in big]) for r in range(len(table[0][key]["values"]))]

    targets = [] if not big else [
        target("allreduce bus bandwidth >= torch.distributed gloo for buffers >= 1 MiB (per round, the worst "
               "buffer size)", worst("vs_torch_gloo"), 1.0),
        target("hvdkit vs raw Horovod (MPI, its defaults) bus bandwidth, buffers >= 1 MiB (per round, the worst "
               "buffer size; reported)", worst("vs_horovod"), None),
        target("fp16 compression vs none, float32-payload bus bandwidth, buffers >= 1 MiB (per round, the median "
               "over sizes; > 1 means compression helps; reported)", mid("fp16_vs_none"), None)]
    timings = {f"allreduce {name} {b >> 10} KiB": [job["rows"][i]["seconds"] for job in per[name]]
               for name in launch for i, b in enumerate(nbytes)}
    return {"rows": rows, "ratios": table, "order": ran, "targets": targets, "timings": timings}
