"""Allreduce of float32 buffers, 4 KiB .. N MiB, through one implementation.

    horovodrun -np 2 python -m benchmarks.workers.allreduce --impl hvdkit --out r.json
    horovodrun -np 2 [--gloo] python -m benchmarks.workers.allreduce --impl horovod --out r.json
    torchrun --nproc-per-node 2 -m benchmarks.workers.allreduce --impl torch_gloo --out r.json
    mpirun -np 2 python -m benchmarks.workers.allreduce --impl mpi4py --out r.json

Each size: 2 warm-up calls, then the median of ``--rounds`` timed bursts of k calls (k ~ 256 MiB / size);
``busbw_rounds`` keeps each burst's value. Bus bandwidth = bytes x 2(n-1)/n / time.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.jobs import order
from benchmarks.workers.common import iterations_for, median, sizes_bytes, write_result


def busbw(nbytes: int, size: int, seconds: float) -> float:
    """Bus bandwidth in GB/s of one allreduce of ``nbytes`` over ``size`` processes taking ``seconds``."""
    return nbytes * 2 * (size - 1) / size / seconds / 1e9


def main() -> None:
    """Time allreduces of each size with the chosen implementation; write the results."""
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True, choices=["hvdkit", "horovod", "torch_gloo", "mpi4py"])
    p.add_argument("--results", required=True)
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--paired-fp16", action="store_true",
                   help="hvdkit/horovod only: time fp16 compression in the same job, rounds alternating with "
                        "uncompressed ones (rows_fp16; bandwidth counts the float32 payload)")
    args = p.parse_args()

    if args.impl == "mpi4py":
        import numpy as np
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()

        def make(n):
            return np.ones(n // 4, dtype=np.float32)

        def reduce(buf):
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

        barrier = comm.Barrier
    else:
        import torch

        torch.set_num_threads(1)

        def make(n):
            return torch.ones(n // 4, dtype=torch.float32)

        if args.impl == "torch_gloo":
            import torch.distributed as dist

            dist.init_process_group("gloo")
            rank, size = dist.get_rank(), dist.get_world_size()

            def reduce(buf):
                dist.all_reduce(buf)

            barrier = dist.barrier
        else:
            if args.impl == "hvdkit":
                import hvdkit.torch as hk

                hk.init(threads=1)  # hvdkit's recommended runtime defaults, then Horovod
            import horovod.torch as hvd

            if args.impl == "horovod":
                hvd.init()
            rank, size = hvd.rank(), hvd.size()

            def reduce(buf):
                hvd.allreduce_(buf, op=hvd.Sum, name="bench")

            def reduce_fp16(buf):
                hvd.allreduce(buf, op=hvd.Sum, name="bench.fp16", compression=hvd.Compression.fp16)

            def barrier():
                hvd.allreduce(torch.zeros(1), name="bench.barrier")

    if args.paired_fp16 and args.impl not in ("hvdkit", "horovod"):
        raise SystemExit(f"--paired-fp16 needs --impl hvdkit or horovod, got {args.impl}")
    variants = {"rows": reduce}
    if args.paired_fp16:
        variants["rows_fp16"] = reduce_fp16
    out: dict = {name: [] for name in variants}
    for nbytes in sizes_bytes(4, args.max_mib):
        buf = make(nbytes)
        k = iterations_for(nbytes)
        for fn in variants.values():
            for _ in range(2):
                fn(buf)
        times: dict = {name: [] for name in variants}
        for r in range(args.rounds):
            for name in order(list(variants), r):  # paired: the variants alternate, A B B A ...
                barrier()
                t0 = time.perf_counter()
                for _ in range(k):
                    variants[name](buf)
                times[name].append((time.perf_counter() - t0) / k)
        for name in variants:
            t = median(times[name])
            out[name].append({"bytes": nbytes, "seconds": t, "busbw_gbps": busbw(nbytes, size, t),
                              "busbw_rounds": [busbw(nbytes, size, x) for x in times[name]]})
        del buf
    if rank == 0:
        write_result(args.results, {"impl": args.impl, "size": size, **out})
    if args.impl == "torch_gloo":
        # Without this, a rank could exit while its peer's Gloo threads still ran; seen once in CI as
        # "terminate called without an active exception" (SIGABRT) at exit.
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
