"""Keras ``model.fit`` vs a ``tf.function`` tape loop, paired in one job (same processes, same model).

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.keras_overhead --results r.json

Separate jobs land in different speed modes on a shared machine (docs/benchmarks.md), so both loops
run in the same processes, on two copies of the same MLP with the same data, threads and runtime
settings, alternating epoch by epoch in ABBA order (the first two rounds, one in each order, not timed):

- fit: ``model.fit`` with ``hvdkit.keras.DistributedOptimizer`` and hvdkit's callbacks, one call for all
  rounds (as a user runs it); the tape epochs run inside its epoch hooks, outside the timed span;
- tape: a ``tf.function`` step with ``hvdkit.tensorflow.DistributedGradientTape`` (``--tape plain``:
  a plain ``tf.GradientTape``, for 1-process baselines).

Reported: ms/step medians of each, the per-round ratios fit/tape and the median and quartiles of the
ratios per block of two rounds (``benchmarks.stats.block_ratios``), how many
times each step function was traced, and (``--breakdown``) the time fit spends inside its compiled
function against the rest of its loop (callbacks, iterator, Python).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.workers.common import (
    add_delta,
    check_warmup,
    median,
    paired_parser,
    paired_ratios,
    quartiles,
    thread_sample,
    write_result,
)


def parse_args() -> argparse.Namespace:
    """The model, the rounds and the knobs that change what fit does."""
    p = paired_parser(__doc__, rounds=12, rounds_help="epochs of each, the first --warmup not timed", warmup=2)
    p.add_argument("--fit-data", choices=["numpy", "dataset"], default="numpy",
                   help="numpy arrays (Keras's array adapter) or the tape loop's tf.data pipeline")
    p.add_argument("--callbacks", choices=["none", "broadcast", "all"], default="broadcast",
                   help="hvdkit callbacks on fit: none, BroadcastInitialState, or + MetricAverage + warm-up")
    p.add_argument("--steps-per-execution", type=int, default=1)
    p.add_argument("--groups", type=int, default=0, help="DistributedOptimizer(groups=...); 0: Horovod default")
    p.add_argument("--tape", choices=["hvdkit", "plain"], default="hvdkit")
    p.add_argument("--intra", type=int, default=0, help="TF intra-op threads (0: hvdkit's init default)")
    p.add_argument("--inter", type=int, default=0, help="TF inter-op threads (0: hvdkit's init default)")
    p.add_argument("--breakdown", action="store_true", help="time fit's compiled function calls")
    p.add_argument("--thread-report", action="store_true",
                   help="CPU time and involuntary context switches per thread name (Linux /proc), per loop")
    p.add_argument("--order", choices=["abba", "fit-first", "tape-first"], default="abba")
    return check_warmup(p, p.parse_args())


def main() -> None:
    """Alternate Keras fit and a tape loop epoch by epoch in one job; write the timings."""
    args = parse_args()
    import hvdkit.keras as hk

    hk.init()
    import keras
    import numpy as np
    import tensorflow as tf

    import hvdkit.tensorflow as htf
    from hvdkit.keras.callbacks import BroadcastInitialState, LearningRateWarmup, MetricAverage

    if args.intra:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    if args.inter:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter)
    rank, size = hk.rank(), hk.size()
    rng = np.random.default_rng(rank)
    n = args.batch * args.steps
    x = rng.normal(size=(n, args.inputs)).astype(np.float32)
    y = rng.integers(0, 10, size=(n,)).astype(np.int64)

    def build() -> keras.Model:
        keras.utils.set_random_seed(0)
        return keras.Sequential([keras.Input((args.inputs,)), keras.layers.Dense(args.hidden, activation="relu"),
                                 keras.layers.Dense(args.hidden, activation="relu"), keras.layers.Dense(10)])

    times: dict[str, list[float]] = {"fit": [], "tape": []}
    inside: list[float] = []  # seconds inside fit's compiled function, per epoch
    epoch_starts: list[float] = []
    calls: list[list[tuple[float, float]]] = []  # (start, end) of each compiled call, per epoch
    traces = {"fit": 0, "tape": 0}
    per_thread: dict[str, dict[str, list[float]]] = {"fit": {}, "tape": {}}
    sample = thread_sample if args.thread_report else (lambda: {})

    # B: the tape loop.
    model_b = build()
    opt_b = keras.optimizers.SGD(0.01 * size)
    opt_b.build(model_b.trainable_variables)
    if args.tape == "hvdkit":
        htf.broadcast_variables(model_b.variables + opt_b.variables, root_rank=0)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).repeat()
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    @tf.function
    def tape_step(it: Any) -> Any:
        traces["tape"] += 1
        xb, yb = next(it)
        with tf.GradientTape() as tape:
            loss_value = tf.reduce_mean(per_example(yb, model_b(xb, training=True)))
        if args.tape == "hvdkit":
            tape = htf.DistributedGradientTape(tape)
        grads = tape.gradient(loss_value, model_b.trainable_variables)
        opt_b.apply_gradients(zip(grads, model_b.trainable_variables))
        return loss_value

    it_b = iter(ds)

    def tape_epoch() -> None:
        s0 = sample()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            out = tape_step(it_b)
        out.numpy()
        times["tape"].append(time.perf_counter() - t0)
        if len(times["tape"]) > args.warmup:
            add_delta(per_thread["tape"], s0, sample())

    # A: Keras fit, one call, the tape epochs run from its epoch hooks outside the timed span.
    model_a = build()
    opt_a = keras.optimizers.SGD(0.01 * size)
    if size > 1 or args.tape == "hvdkit":
        opt_a = hk.DistributedOptimizer(opt_a, groups=args.groups or None)
    model_a.compile(optimizer=opt_a, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    steps_per_execution=args.steps_per_execution)
    train_step = model_a.train_step

    def counted_train_step(data: Any) -> Any:
        traces["fit"] += 1
        return train_step(data)

    model_a.train_step = counted_train_step
    fit_windows: list[tuple[float, float]] = []
    gc_pauses: list[tuple[float, float, int]] = []  # (start, seconds, generation) of Python's collections
    if args.breakdown:
        import gc

        gc_start: list[float] = [0.0]

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                gc_start[0] = time.perf_counter()
            else:
                gc_pauses.append((gc_start[0], time.perf_counter() - gc_start[0], info["generation"]))

        gc.callbacks.append(on_gc)
        model_a.make_train_function()
        compiled = model_a.train_function

        def timed(iterator: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return compiled(iterator)
            finally:
                t1 = time.perf_counter()
                inside[-1] += t1 - t0
                calls[-1].append((t0, t1))

        model_a.train_function = timed

    def tape_first(epoch: int) -> bool:
        return args.order == "tape-first" or (args.order == "abba" and epoch % 2 == 1)

    class Before(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if tape_first(epoch):
                tape_epoch()

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            inside.append(0.0)
            calls.append([])
            self.s0 = sample()
            self.t0 = time.perf_counter()
            epoch_starts.append(self.t0)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            times["fit"].append(time.perf_counter() - self.t0)
            fit_windows.append((self.t0, self.t0 + times["fit"][-1]))
            if epoch >= args.warmup:
                add_delta(per_thread["fit"], self.s0, sample())
            if not tape_first(epoch):
                tape_epoch()

    hvdkit_cbs: list[Any] = []
    if args.callbacks in ("broadcast", "all"):
        hvdkit_cbs.append(BroadcastInitialState())
    if args.callbacks == "all":
        hvdkit_cbs += [MetricAverage(), LearningRateWarmup(warmup_epochs=1)]  # type: ignore[call-arg]
    if args.fit_data == "numpy":
        data: dict[str, Any] = {"x": x, "y": y, "batch_size": args.batch}
    else:
        data = {"x": ds, "steps_per_epoch": args.steps}
    model_a.fit(**data, epochs=args.rounds, shuffle=False, verbose=0, callbacks=[Before(), *hvdkit_cbs, Timer()])

    w = args.warmup
    a, b = times["fit"][w:], times["tape"][w:]
    if rank == 0:
        per_step = 1000 / args.steps
        result: dict[str, Any] = {
            "size": size, "batch_per_rank": args.batch, "steps": args.steps, "rounds": args.rounds,
            "knobs": {k: v for k, v in vars(args).items() if k != "results"},
            "threads": {"intra": tf.config.threading.get_intra_op_parallelism_threads(),
                        "inter": tf.config.threading.get_inter_op_parallelism_threads()},
            "ms_per_step": {"fit": median(a) * per_step, "tape": median(b) * per_step},
            "ms_per_step_quartiles": {"fit": [q * per_step for q in quartiles(a)],
                                      "tape": [q * per_step for q in quartiles(b)]},
            **paired_ratios(a, b), "traces": traces, "epoch_times": times, "load_avg": os.getloadavg()}
        if args.thread_report:
            timed_steps = args.steps * (args.rounds - w)
            result["thread_ms_per_step"] = {
                impl: {k: {"cpu_ms": v[0] / timed_steps, "involuntary_switches": v[1] / timed_steps, "threads": v[2]}
                       for k, v in sorted(rows.items(), key=lambda kv: -kv[1][0])}
                for impl, rows in per_thread.items()}
        if args.breakdown:
            result["fit_inside_ms_per_step"] = median(inside[w:]) * per_step
            result["fit_outside_ms_per_step"] = median([t - i for t, i in zip(a, inside[w:])]) * per_step
            # Where the outside time goes: before the first step of an epoch, between steps, after the last.
            starts = [c[0][0] - t0 for c, t0 in zip(calls[w:], epoch_starts[w:]) if c]
            gaps = [c[k + 1][0] - c[k][1] for c in calls[w:] for k in range(len(c) - 1)]
            longest = [max(e - b for b, e in c) for c in calls[w:] if c]
            result["fit_breakdown_ms"] = {
                "before_first_step_per_epoch": [x * 1000 for x in starts],
                "gap_between_steps_median": median(gaps) * 1000, "gap_between_steps_max": max(gaps) * 1000,
                "longest_step_per_epoch": [x * 1000 for x in longest],
                "python_gc_ms_per_epoch": [sum(d for t, d, _ in gc_pauses if b <= t <= e) * 1000
                                           for b, e in fit_windows[w:]],
                "python_gc_gen2_per_epoch": [sum(1 for t, _, g in gc_pauses if b <= t <= e and g == 2)
                                             for b, e in fit_windows[w:]]}
        write_result(args.results, result)
        print({k: result[k] for k in ("ms_per_step", "ratio_median", "ratio_quartiles", "traces")}
              | ({"inside": result["fit_inside_ms_per_step"], "outside": result["fit_outside_ms_per_step"]}
                 if args.breakdown else {}), flush=True)


if __name__ == "__main__":
    main()
