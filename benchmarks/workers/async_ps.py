"""Synchronous allreduce training against asynchronous parameter-server SGD, on the simulated cluster.

    --mode sync    every rank is a worker: gradient, ring allreduce (the average), the same update everywhere
    --mode async   rank 0 is the server, the others workers: a worker pushes its gradient and gets the current
                   weights back, with no barrier; the server applies each gradient as it comes, or drops it when
                   it was computed on weights more than --staleness updates old
    --straggler    the last worker's steps take (1 + factor) times as long: it sleeps factor x its own measured
                   compute time after each gradient, as a slower CPU would (a sleep models the device here; it
                   synchronises nothing)

The model is a small real one: a 64-256-10 MLP in numpy on the 8x8 digits of examples/data/digits.npz (1437
for training, 360 held out), the training rows sharded over the workers; every worker computes ``--steps`` gradients of
``--batch`` rows in both modes. Rank 0 writes the held-out accuracy over wall time (``curve``) and the final one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from benchmarks.workers.common import positive, write_result

GRAD, WEIGHTS, DONE = 1, 2, 3
HIDDEN = 256


def data(seed: int = 0):
    """Digits, scaled to [0, 1], split 80/20 with a fixed permutation."""
    with np.load(Path(__file__).resolve().parents[2] / "examples" / "data" / "digits.npz") as d:
        x, y = d["x"], d["y"]
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = (x[order] / 16.0).astype(np.float32), y[order]
    cut = int(0.8 * len(y))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def shapes(features: int, classes: int) -> list[tuple[int, ...]]:
    return [(features, HIDDEN), (HIDDEN,), (HIDDEN, classes), (classes,)]


def unflatten(w: np.ndarray, shp: list[tuple[int, ...]]) -> list[np.ndarray]:
    out, i = [], 0
    for s in shp:
        n = int(np.prod(s))
        out.append(w[i:i + n].reshape(s))
        i += n
    return out


def init(shp: list[tuple[int, ...]], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parts = [rng.normal(0, np.sqrt(2 / s[0]), s).ravel() if len(s) == 2 else np.zeros(s).ravel() for s in shp]
    return np.concatenate(parts).astype(np.float32)


def gradient(w: np.ndarray, shp, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cross-entropy gradient of the MLP at ``w`` on a batch, flattened like ``w``."""
    w1, b1, w2, b2 = unflatten(w, shp)
    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    dh = (p @ w2.T) * (h > 0)
    return np.concatenate([(x.T @ dh).ravel(), dh.sum(0), (h.T @ p).ravel(), p.sum(0)]).astype(np.float32)


def accuracy(w: np.ndarray, shp, x: np.ndarray, y: np.ndarray) -> float:
    w1, b1, w2, b2 = unflatten(w, shp)
    return float(((np.maximum(x @ w1 + b1, 0) @ w2 + b2).argmax(1) == y).mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True)
    p.add_argument("--mode", choices=["sync", "async"], required=True)
    p.add_argument("--steps", type=positive, default=300, help="gradients each worker computes")
    p.add_argument("--batch", type=positive, default=32)
    p.add_argument("--lr", type=float, default=0.1, help="of the synchronous update (async: lr / workers)")
    p.add_argument("--staleness", type=int, default=None, help="async: drop gradients older than this many updates")
    p.add_argument("--straggler", type=float, default=0.0, help="the last worker's extra time, x its compute time")
    p.add_argument("--eval-every", type=positive, default=20, help="updates between two accuracy measurements")
    args = p.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    xtr, ytr, xte, yte = data()
    shp = shapes(xtr.shape[1], 10)
    w = init(shp)
    first = 1 if args.mode == "async" else 0
    workers = size - first
    me = rank - first
    if me >= 0:
        xs, ys = xtr[me::workers], ytr[me::workers]
    rng = np.random.default_rng(100 + rank)
    curve: list[tuple[float, float]] = []
    comm.Barrier()
    t0 = time.perf_counter()

    def step_gradient(weights: np.ndarray) -> np.ndarray:
        idx = rng.integers(0, len(ys), args.batch)
        c = time.perf_counter()
        g = gradient(weights, shp, xs[idx], ys[idx])
        if args.straggler and me == workers - 1:
            time.sleep(args.straggler * (time.perf_counter() - c))
        return g

    updates = dropped = 0
    if args.mode == "sync":
        g = np.empty_like(w)
        for s in range(args.steps):
            comm.Allreduce(step_gradient(w), g, op=MPI.SUM)
            w -= args.lr / workers * g
            updates += 1
            if rank == 0 and (s % args.eval_every == 0 or s == args.steps - 1):
                curve.append((time.perf_counter() - t0, accuracy(w, shp, xte, yte)))
    elif rank == 0:  # the server
        lr, version, done = args.lr / workers, 0, 0
        versions = np.zeros(size, np.int64)  # the version each worker's last weights had
        g, status = np.empty_like(w), MPI.Status()
        while done < workers:
            comm.Recv(g, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            src = status.Get_source()
            if status.Get_tag() == DONE:
                done += 1
                continue
            if args.staleness is None or version - versions[src] <= args.staleness:
                w -= lr * g
                version += 1
                if version % args.eval_every == 0:
                    curve.append((time.perf_counter() - t0, accuracy(w, shp, xte, yte)))
            else:
                dropped += 1
            versions[src] = version
            comm.Send(w, dest=src, tag=WEIGHTS)
        updates = version
        curve.append((time.perf_counter() - t0, accuracy(w, shp, xte, yte)))
    else:
        for _ in range(args.steps):
            comm.Send(step_gradient(w), dest=0, tag=GRAD)
            comm.Recv(w, source=0, tag=WEIGHTS)
        comm.Send(w, dest=0, tag=DONE)
    seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    if rank == 0:
        write_result(args.results, {"mode": args.mode, "workers": workers, "curve": curve, "seconds": seconds,
                                    "updates": updates, "dropped": dropped, "final_accuracy": curve[-1][1],
                                    "params": int(w.size)})


if __name__ == "__main__":
    main()
