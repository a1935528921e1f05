"""A real hang in traced TensorFlow code, at np=2: the hang report must end it, naming the collective each rank
waits in (seen only in Horovod's queue: no Python frame calls it) and the line each rank is at (``GUILTY``).

    rank 0 runs a tf.function that averages a metric over the ranks (its code decides, on rank 0 only, to
    log it), while rank 1 goes on to its next training step, a tf.function that averages the gradients.
"""

import tensorflow as tf

import hvdkit.tensorflow as hvd

hvd.init()
r = hvd.rank()
w = tf.Variable([1.0, 2.0], name="w")


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * w)
    (grad,) = hvd.DistributedGradientTape(tape).gradient(loss, [w])
    w.assign_sub(0.1 * grad)
    return loss


@tf.function
def mean_metric():
    return hvd.allreduce(tf.reduce_sum(w), name="mean_metric")


for _ in range(3):
    train_step()
print(f"rank {r}: trained 3 steps", flush=True)
if r == 0:
    mean_metric()  # GUILTY: rank 0
else:
    train_step()  # GUILTY: rank 1
print("not reached", flush=True)
