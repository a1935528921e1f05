"""``hvdkit doctor --allreduce``: this machine's allreduce bandwidth through Horovod against the transport's own.

Two 2-process jobs time allreduces of 1-64 MiB float32 buffers: one through Horovod (with hvdkit's
runtime settings), one through the transport Horovod ran on (mpi4py under ``mpirun``, or
``torch.distributed``'s gloo under ``torchrun``). Horovod's negotiation costs a little; far less
bandwidth means something on the machine or in the environment is off.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

SIZES_MIB = (1, 4, 16, 64)
#: Below this ratio of the transport's bandwidth (median over the sizes) the check warns.
WARN_BELOW = 0.5
TIMEOUT = 300


def busbw_gbps(nbytes: int, size: int, seconds: float) -> float:
    """Bus bandwidth in GB/s of one allreduce of ``nbytes`` over ``size`` processes taking ``seconds``."""
    return nbytes * 2 * (size - 1) / size / seconds / 1e9


def _worker(impl: str, out: str) -> None:
    """In each rank: time allreduces of every size (median of 3 bursts); rank 0 writes the rows."""
    controller = impl
    if impl == "mpi4py":
        import numpy as np
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank, size, barrier = comm.Get_rank(), comm.Get_size(), comm.Barrier

        def make(n: int) -> Any:
            return np.ones(n, dtype=np.float32)

        def reduce(buf: Any) -> None:
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    else:
        import torch

        def make(n: int) -> Any:
            return torch.ones(n, dtype=torch.float32)

        if impl == "torch_gloo":
            import torch.distributed as dist

            dist.init_process_group("gloo")
            rank, size, barrier = dist.get_rank(), dist.get_world_size(), dist.barrier

            def reduce(buf: Any) -> None:
                dist.all_reduce(buf)
        else:
            import horovod.torch as hvd

            import hvdkit.torch as hk

            hk.init(threads=1)  # hvdkit's runtime settings, as a training job gets them
            rank, size = hvd.rank(), hvd.size()
            controller = "mpi" if hvd.mpi_enabled() else "gloo"

            def reduce(buf: Any) -> None:
                hvd.allreduce_(buf, op=hvd.Sum, name="doctor.allreduce")

            def barrier() -> None:
                hvd.allreduce(torch.zeros(1), name="doctor.barrier")

    rows = []
    for mib in SIZES_MIB:
        buf = make((mib << 20) // 4)
        reps = max(2, 64 // mib)
        reduce(buf)  # warm-up: buffers, connections, Horovod's response cache
        bursts = []
        for _ in range(3):
            barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                reduce(buf)
            bursts.append((time.perf_counter() - t0) / reps)
        rows.append({"bytes": mib << 20, "busbw_gbps": busbw_gbps(mib << 20, size, median(bursts))})
    if rank == 0:
        Path(out).write_text(json.dumps({"impl": impl, "controller": controller, "size": size, "rows": rows}))
    if impl == "torch_gloo":  # leave the process group together: a rank exiting early aborts its peer
        dist.barrier()
        dist.destroy_process_group()


def _launch(impl: str) -> dict[str, Any]:
    """Run the 2-process job for ``impl`` under its launcher; its rank 0's rows."""
    with tempfile.TemporaryDirectory(prefix="hvdkit-allreduce-") as tmp:
        out = str(Path(tmp) / "result.json")
        cmd = [sys.executable, "-m", "hvdkit.tools.allreduce_check", "--worker", impl, "--out", out]
        if impl == "horovod":
            cmd = ["horovodrun", "-np", "2", "-H", "localhost:2", *cmd]
        elif impl == "mpi4py":
            cmd = ["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "none", *cmd]
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port),
                   "-m", "hvdkit.tools.allreduce_check", "--worker", impl, "--out", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        if proc.returncode != 0 or not Path(out).exists():
            raise RuntimeError(f"{' '.join(cmd[:6])} ... failed (exit status {proc.returncode}):\n"
                               f"{(proc.stdout + proc.stderr)[-2000:]}")
        return json.loads(Path(out).read_text())


def judge(horovod: dict[str, Any], transport: dict[str, Any]) -> dict[str, Any]:
    """Per size, Horovod's bus bandwidth over the transport's; the median ratio; a warning when it is low."""
    rows = [{"bytes": h["bytes"], "horovod_gbps": h["busbw_gbps"], "transport_gbps": t["busbw_gbps"],
             "ratio": h["busbw_gbps"] / t["busbw_gbps"]} for h, t in zip(horovod["rows"], transport["rows"])]
    ratio = median(r["ratio"] for r in rows)
    exported = sorted(k for k in os.environ if k.startswith(("HOROVOD_", "OMPI_MCA_")))
    warning = None
    if ratio < WARN_BELOW:
        warning = (f"Horovod's allreduce reached {ratio:.2f} of {transport['impl']}'s bandwidth (median over "
                   f"{SIZES_MIB[0]}-{SIZES_MIB[-1]} MiB), below {WARN_BELOW}. Check: other processes busy on this "
                   f"machine's {os.cpu_count()} cores (top); Horovod settings exported in this shell, which win over "
                   f"hvdkit's ({', '.join(exported) or 'none exported'}); that Horovod is hvdkit's patched build "
                   "(hvdkit doctor).")
    return {"controller": horovod["controller"], "transport": transport["impl"], "rows": rows, "ratio_median": ratio,
            "warn_below": WARN_BELOW, "ok": warning is None, "warning": warning}


def _transport(controller: str) -> str:
    """The transport job to compare with: MPI's own allreduce where Horovod ran on MPI and mpi4py is there."""
    if controller == "mpi" and importlib.util.find_spec("mpi4py") and shutil.which("mpirun"):
        return "mpi4py"
    return "torch_gloo"


def check() -> dict[str, Any]:
    """Run both jobs and compare them (``ok`` False when Horovod is far below the transport); raises
    RuntimeError when a job cannot run or fails."""
    if shutil.which("horovodrun") is None or importlib.util.find_spec("torch") is None:
        raise RuntimeError("needs horovodrun on PATH and PyTorch (pip install 'hvdkit[torch]'; hvdkit build-horovod)")
    try:
        horovod = _launch("horovod")
        return judge(horovod, _launch(_transport(horovod["controller"])))
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(str(exc)) from exc


def render(result: dict[str, Any]) -> str:
    """:func:`check`'s result as text."""
    lines = [f"Allreduce, 2 processes on this machine: Horovod ({result['controller']}) against "
             f"{result['transport']}, bus bandwidth GB/s"]
    lines += [f"  {r['bytes'] >> 20:>3} MiB  horovod {r['horovod_gbps']:7.2f}  {result['transport']} "
              f"{r['transport_gbps']:7.2f}  ratio {r['ratio']:.2f}" for r in result["rows"]]
    lines.append(f"WARNING: {result['warning']}" if result["warning"] else
                 f"OK: median ratio {result['ratio_median']:.2f} (warns below {WARN_BELOW})")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="one rank of hvdkit doctor --allreduce (started by its launcher)")
    p.add_argument("--worker", required=True, choices=["horovod", "mpi4py", "torch_gloo"])
    p.add_argument("--out", required=True)
    a = p.parse_args()
    _worker(a.worker, a.out)
