"""Compute-bound Keras 3 training throughput: hvdkit vs tf.distribute.MultiWorkerMirroredStrategy.

    horovodrun -np 2 python -m benchmarks.workers.train_keras --impl hvdkit --results r.json
    horovodrun -np 2 python -m benchmarks.workers.train_keras --impl hvdkit_tape --results r.json
    TF_CONFIG=... python -m benchmarks.workers.train_keras --impl mwms --results r.json   (one per worker)

hvdkit: ``model.fit`` with ``hvdkit.keras.DistributedOptimizer``, fed the same ``tf.data`` pipeline as the
loops (``--fit-data numpy``: the arrays, through Keras's array adapter, which re-creates its iterator every
epoch and runs a parallel map beside the step: docs/benchmarks.md). hvdkit_tape: a ``tf.function``
step with ``hvdkit.tensorflow.DistributedGradientTape``. mwms: the same step under
``strategy.run``; Keras 3's ``model.fit`` fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585), so a custom loop is how MWMS runs Keras 3 models today.
Same MLP, batch per worker, steps per epoch, and TF threads = cores / workers. Per-epoch wall
times after the first epoch (tracing and warm-up); reports the median.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.workers.common import median, write_result


def main() -> None:
    """Time Keras training steps with the chosen implementation; write the results."""
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True, choices=["hvdkit", "hvdkit_tape", "mwms", "plain_fit", "plain_tape"])
    p.add_argument("--results", required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--inputs", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--fit-data", choices=["dataset", "numpy"], default="dataset")
    args = p.parse_args()

    cores = len(os.sched_getaffinity(0))
    if args.impl in ("hvdkit", "hvdkit_tape"):
        import hvdkit.keras as hk

        hk.init()
        rank, size = hk.rank(), hk.size()
    elif args.impl.startswith("plain"):  # one process, no distribution: Keras's own baseline
        rank, size = 0, 1
    else:
        import tensorflow as tf

        cfg = json.loads(os.environ["TF_CONFIG"])
        size = len(cfg["cluster"]["worker"])
        rank = cfg["task"]["index"]
        threads = max(1, cores // size)
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    import keras
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(rank)
    n = args.batch * args.steps
    x = rng.normal(size=(n, args.inputs)).astype(np.float32)
    y = rng.integers(0, 10, size=(n,)).astype(np.int64)
    epoch_times: list[float] = []
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).repeat()

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            epoch_times.append(time.perf_counter() - self.t0)

    def build():
        keras.utils.set_random_seed(0)
        return keras.Sequential([keras.Input((args.inputs,)), keras.layers.Dense(args.hidden, activation="relu"),
                                 keras.layers.Dense(args.hidden, activation="relu"), keras.layers.Dense(10)])

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if args.impl in ("hvdkit", "plain_fit"):
        model = build()
        if args.impl == "hvdkit":
            from hvdkit.keras.callbacks import BroadcastInitialState

            model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01 * size)), loss=loss)
            cbs = [BroadcastInitialState(), Timer()]
        else:
            model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)
            cbs = [Timer()]
        data = {"x": x, "y": y, "batch_size": args.batch} if args.fit_data == "numpy" else {
            "x": ds, "steps_per_epoch": args.steps}
        model.fit(**data, epochs=args.epochs, shuffle=False, verbose=0, callbacks=cbs)
    else:
        if args.impl == "mwms":
            # Global batches of batch x workers; each worker's replica takes `batch` of them.
            ds = tf.data.Dataset.from_tensor_slices((np.concatenate([x] * size), np.concatenate([y] * size)))
            ds = ds.batch(args.batch * size).repeat()
            opts = tf.data.Options()
            opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
            ds = strategy.experimental_distribute_dataset(ds.with_options(opts))
            with strategy.scope():
                model = build()
                opt = keras.optimizers.SGD(0.01 * size)
                opt.build(model.trainable_variables)
        elif args.impl == "plain_tape":
            model = build()
            opt = keras.optimizers.SGD(0.01)
            opt.build(model.trainable_variables)
        else:
            import hvdkit.tensorflow as htf

            model = build()
            opt = keras.optimizers.SGD(0.01 * size)
            opt.build(model.trainable_variables)
            htf.broadcast_variables(model.variables + opt.variables, root_rank=0)
        per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                loss_value = tf.reduce_mean(per_example(yb, model(xb, training=True)))
            if args.impl in ("mwms", "plain_tape"):
                grads = tape.gradient(loss_value, model.trainable_variables)  # MWMS all-reduces in apply
            else:
                grads = htf.DistributedGradientTape(tape).gradient(loss_value, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss_value

        @tf.function
        def train_step(it):
            xb, yb = next(it)
            if args.impl == "mwms":
                return strategy.run(replica_step, args=(xb, yb))
            return replica_step(xb, yb)

        it = iter(ds)
        for _ in range(args.epochs):
            t0 = time.perf_counter()
            for _ in range(args.steps):
                out = train_step(it)
            tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                                  strategy.experimental_local_results(out) if args.impl == "mwms" else out)
            epoch_times.append(time.perf_counter() - t0)

    t = median(epoch_times[1:])
    if rank == 0:
        write_result(args.results, {
            "impl": args.impl, "size": size, "batch_per_rank": args.batch, "ms_per_step": t / args.steps * 1000,
            "samples_per_s": args.batch * args.steps * size / t, "epoch_times": epoch_times})


if __name__ == "__main__":
    main()
