"""A TF2 custom training loop with hvdkit.tensorflow's DistributedGradientTape (Keras 3 layers).

    horovodrun -np 2 -H localhost:2 python examples/tensorflow_custom_loop.py
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _digits

import hvdkit.tensorflow as htf


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05, help="single-worker LR; scaled by the number of workers")
    args = p.parse_args()

    htf.init()
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    x_tr, y_tr, x_val, y_val = _digits.load()
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    opt = keras.optimizers.SGD(args.lr * htf.size(), momentum=0.9)
    opt.build(model.trainable_variables)
    htf.broadcast_variables(model.variables + opt.variables, root_rank=0)  # Keras 3 variables work
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ds = (tf.data.Dataset.from_tensor_slices((x_tr, y_tr)).shard(htf.size(), htf.rank())
          .shuffle(2048, seed=0, reshuffle_each_iteration=True).batch(args.batch_size))

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = htf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    comm = htf.HorovodComm()
    for epoch in range(args.epochs):
        losses = [float(train_step(x, y)) for x, y in ds]
        mean = comm.allreduce_mean({"loss": sum(losses) / len(losses)})["loss"]
        acc = float(keras.metrics.sparse_categorical_accuracy(y_val, model(x_val)).numpy().mean())
        if htf.rank() == 0:
            print(f"epoch {epoch + 1:3d}/{args.epochs}  loss {mean:.4f}  val_accuracy {acc:.4f}", flush=True)
    if htf.rank() == 0:
        print(f"final validation accuracy: {acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
