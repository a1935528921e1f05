"""One reduction algorithm, timed on the simulated cluster (``benchmarks/netsim.py``), one rank per node.

    --algo horovod [--compression C]      Horovod's allreduce (horovod.torch, MPI controller; Open MPI's
                                          algorithm from OMPI_MCA_coll_tuned_*), in place; C = fp16:
                                          Horovod's fp16 compressor as its DistributedOptimizer calls it
                                          (a new half tensor down, a new float32 tensor back); fp16-reuse:
                                          hvdkit's FP16Compressor (the same casts into buffers it keeps)
    --algo mpi                            mpi4py's Allreduce (the algorithm from OMPI_MCA_coll_tuned_*)
    --algo pingpong                       ranks 0 and 1 bounce a 1-byte message: the one-way latency
    --algo ps --servers S                 a synchronous parameter server: ranks 0..S-1 serve one shard each,
                                          the others push their gradient, then pull the sum

Every round starts after a barrier and ends when the slowest rank is done (the max over ranks). Rank 0
writes ``{"payloads": [{"payload_bytes", "seconds": [per round]}]}``; with compression, also rank 0's own
``phases`` (seconds per round of the cast down, the allreduce, the cast back).

The parameter server is written here on mpi4py point-to-point messages: the maintained PS systems do not fit
a float32 buffer timed on this cluster (BytePS needs its own build and scheduler and is unmaintained since
2022; TensorFlow's ParameterServerStrategy times a whole training step, not one reduction), and sharing MPI's
TCP transport with the allreduce jobs keeps the comparison about the algorithm.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks.workers.common import positive, write_result

CHUNK = 4 << 20  # elements a server receives from every worker at once (16 MiB each)


def ps_round(comm: Any, buf: np.ndarray, servers: int, scratch: list[np.ndarray]) -> None:
    """One synchronous PS reduction of ``buf``: workers push, servers sum their shard, workers pull."""
    rank, size = comm.Get_rank(), comm.Get_size()
    workers = list(range(servers, size))
    edges = [buf.size * i // servers for i in range(servers + 1)]
    shards = [range(edges[i], edges[i + 1]) for i in range(servers)]
    if rank < servers:
        lo, hi = edges[rank], edges[rank + 1]
        total = buf[lo:hi]
        total[:] = 0
        for start in range(0, hi - lo, CHUNK):
            stop = min(start + CHUNK, hi - lo)
            reqs = [comm.Irecv(scratch[j][: stop - start], source=w, tag=1) for j, w in enumerate(workers)]
            type(reqs[0]).Waitall(reqs)
            for j in range(len(workers)):
                total[start:stop] += scratch[j][: stop - start]
        sends = [comm.Isend(total, dest=w, tag=2) for w in workers]
        type(sends[0]).Waitall(sends)
    else:
        # in the chunks the server receives: a message larger than its receive would be truncated
        sends = [comm.Isend(buf[c: min(c + CHUNK, s.stop)], dest=i, tag=1)
                 for i, s in enumerate(shards) for c in range(s.start, s.stop, CHUNK)]
        out = np.empty_like(buf)
        recvs = [comm.Irecv(out[s.start: s.stop], source=i, tag=2) for i, s in enumerate(shards)]
        type(sends[0]).Waitall(sends + recvs)
        buf[:] = out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True)
    p.add_argument("--algo", choices=["horovod", "mpi", "ps", "pingpong"], required=True)
    p.add_argument("--compression", choices=["none", "fp16", "fp16-reuse"], default="none")
    p.add_argument("--servers", type=positive, default=1)
    p.add_argument("--params", type=positive, nargs="+", required=True, help="payloads, float32 elements")
    p.add_argument("--rounds", type=positive, default=3, help="timed rounds per payload (one more untimed first)")
    args = p.parse_args()

    if args.algo == "horovod":  # Horovod's own collectives time themselves: no mpi4py communicator beside them
        import horovod.torch as hvd
        import torch

        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        from hvdkit.torch.distribute import FP16Compressor

        fp16 = FP16Compressor() if args.compression == "fp16-reuse" else hvd.Compression.fp16
        barrier = hvd.barrier

        def slowest(x: float) -> float:
            return float(hvd.allreduce(torch.tensor([x], dtype=torch.float64), op=hvd.Max, name="t").item())

        def make(n: int):
            return torch.ones(n, dtype=torch.float32)

        def reduce(t, i: int):
            if args.compression == "none":  # in place, as Horovod's optimizers do
                return hvd.allreduce_(t, op=hvd.Sum, name=f"g{i}")
            t0 = time.perf_counter()
            c, ctx = fp16.compress(t)  # as horovod.torch.DistributedOptimizer calls a compressor
            t1 = time.perf_counter()
            hvd.allreduce_(c, op=hvd.Sum, name=f"g{i}")
            t2 = time.perf_counter()
            out = fp16.decompress(c, ctx)
            phases.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
            return out
    else:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
        barrier = comm.Barrier

        def slowest(x: float) -> float:
            return comm.allreduce(x, op=MPI.MAX)

    if args.algo == "pingpong":
        one, trips = np.zeros(1, np.uint8), []
        for _ in range(200):
            comm.Barrier()
            t0 = time.perf_counter()
            if rank == 0:
                comm.Send(one, dest=1)
                comm.Recv(one, source=1)
            elif rank == 1:
                comm.Recv(one, source=0)
                comm.Send(one, dest=0)
            trips.append(time.perf_counter() - t0)
        if rank == 0:
            write_result(args.results, {"latency_ms": float(np.median(trips[20:])) / 2 * 1e3})
        return
    if args.algo == "mpi":
        def make(n: int):
            return np.ones(n, dtype=np.float32)

        def reduce(t, i: int):
            comm.Allreduce(MPI.IN_PLACE, t, op=MPI.SUM)
            return t
    elif args.algo == "ps":
        if not 1 <= args.servers < size:
            p.error(f"--servers must leave at least one worker rank (size {size}), got {args.servers}")
        scratch: list[np.ndarray] = []

        def make(n: int):
            if rank < args.servers:
                scratch[:] = [np.empty(min(CHUNK, n), np.float32) for _ in range(size - args.servers)]
            return np.ones(n, dtype=np.float32)

        def reduce(t, i: int):
            ps_round(comm, t, args.servers, scratch)
            return t

    servers = args.servers if args.algo == "ps" else 0
    rows = []
    phases: list[tuple[float, float, float]] = []
    for n in args.params:
        buf = make(n)
        times = []
        phases.clear()
        for r in range(args.rounds + 1):
            buf[:] = 1  # the same sum every round (fp16 would overflow on repeated sums)
            barrier()
            t0 = time.perf_counter()
            got = reduce(buf, r)
            dt = slowest(time.perf_counter() - t0)
            if r:
                times.append(dt)
            elif rank >= servers and not float(got[0]) == float(got[-1]) == size - servers:
                raise SystemExit(f"rank {rank}: {args.algo} summed to {float(got[0])}, expected {size - servers}")
        del buf, got
        rows.append({"payload_bytes": 4 * n, "seconds": times})
        if phases:  # the untimed first round left out
            rows[-1]["phases"] = dict(zip(("cast_down", "allreduce", "cast_back"), map(list, zip(*phases[1:]))))
    if rank == 0:
        write_result(args.results, {"payloads": rows, "size": size})


if __name__ == "__main__":
    main()
