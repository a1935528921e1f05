"""A real hang in eager TensorFlow at np=2: after two training steps rank 0 gathers a metric while rank 1
averages another, both eagerly. Both ranks fire; the hang report's exchange (from its own thread, while the
training thread waits in an eager collective) must work, so rank 0's summary holds both ranks' lines."""

import tensorflow as tf

import hvdkit.tensorflow as hvd

hvd.init()
import horovod.tensorflow as htf  # noqa: E402

r = hvd.rank()
w = tf.Variable([1.0, 2.0])
for _ in range(2):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * w)
    (grad,) = hvd.DistributedGradientTape(tape).gradient(loss, [w])
    w.assign_sub(0.1 * grad)
print(f"rank {r}: trained 2 steps", flush=True)
if r == 0:
    htf.allgather(tf.reshape(loss, [1]), name="gathered_loss")  # GUILTY: rank 0
else:
    htf.allreduce(w, name="averaged_w")  # GUILTY: rank 1
print("not reached", flush=True)
