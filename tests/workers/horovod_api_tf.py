"""Under horovodrun -np 2: Horovod's TensorFlow names through ``import hvdkit.tensorflow as hvd``; each rank
writes what it saw to OUT/rank<r>.json (the test compares the ranks and checks the values)."""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import tensorflow as tf

import hvdkit.tensorflow as hvd

out = Path(sys.argv[1])
hvd.init()
r, n = hvd.rank(), hvd.size()
res: dict = {"rank": r, "size": n, "is_initialized": hvd.is_initialized(), "mpi_built": bool(hvd.mpi_built())}


def val(t):
    return t.numpy().tolist()


x = tf.constant([r + 1.0, 10.0 * (r + 1)])
res["allreduce_avg"] = val(hvd.allreduce(x, name="avg"))
res["allreduce_sum"] = val(hvd.allreduce(x, op=hvd.Sum, name="sum"))
res["allreduce_fp16"] = val(hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16, name="fp16"))
res["allreduce_scaled"] = val(hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5, name="sc"))
res["grouped_allreduce"] = [val(t) for t in hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum)]
res["allgather"] = val(hvd.allgather(tf.fill([r + 1, 2], float(r)), name="gather"))
res["broadcast"] = val(hvd.broadcast(tf.constant([float(r + 5)]), root_rank=n - 1, name="bcast"))
res["alltoall"] = val(hvd.alltoall(tf.constant([10.0 * r, 10.0 * r + 1]), name="a2a"))
res["reducescatter"] = val(hvd.reducescatter(tf.constant([1.0 + r, 2.0, 3.0, 4.0]), op=hvd.Sum, name="rs"))
res["broadcast_object"] = hvd.broadcast_object({"from": r}, root_rank=n - 1)
res["allgather_object"] = hvd.allgather_object(r * 3)

# broadcast_variables / broadcast_: tf.Variables and Keras 3 variables alike
tv = tf.Variable([float(r), 1.0])
kv = keras.Variable([float(r) + 10.0])
hvd.broadcast_variables([tv, kv], root_rank=0)
res["broadcast_variables"] = [val(tv), keras.ops.convert_to_numpy(kv).tolist()]
kv2 = keras.Variable([float(r) + 20.0])
hvd.broadcast_([kv2], root_rank=n - 1)
res["broadcast_inplace"] = keras.ops.convert_to_numpy(kv2).tolist()


def tape_grads(source, **kwargs):
    """d/dw of (r + 1) * sum(w): the gradient on rank r is r + 1 for every element."""
    with tf.GradientTape() as tape:
        loss = (r + 1.0) * tf.reduce_sum(source * 1.0)
    tape = hvd.DistributedGradientTape(tape, **kwargs)
    (g,) = tape.gradient(loss, [source])
    return val(tf.convert_to_tensor(g))


w = tf.Variable([1.0, 1.0])
res["tape_average"] = tape_grads(w)
res["tape_sum"] = tape_grads(w, op=hvd.Sum)
res["tape_fp16"] = tape_grads(w, compression=hvd.Compression.fp16)
res["tape_predivide"] = tape_grads(w, gradient_predivide_factor=2.0)
res["tape_adasum"] = tape_grads(w, op=hvd.Adasum)
res["tape_keras_variable"] = tape_grads(keras.Variable([1.0, 1.0]))


@tf.function
def traced_step(v):
    with tf.GradientTape() as tape:
        loss = (r + 1.0) * tf.reduce_sum(v * 1.0)
    return hvd.DistributedGradientTape(tape).gradient(loss, [v])[0]


res["tape_tf_function"] = val(traced_step(w))

# unconnected_gradients, as tf.GradientTape.gradient takes it: rank 0's loss does not use b
a, b = tf.Variable([1.0]), tf.Variable([2.0])
with tf.GradientTape(persistent=True) as tape:
    loss = (r + 1.0) * tf.reduce_sum(a) + (3.0 * tf.reduce_sum(b) if r == 1 else 0.0)
try:
    res["unconnected_zero"] = [val(g) for g in hvd.DistributedGradientTape(tape).gradient(
        loss, [a, b], unconnected_gradients=tf.UnconnectedGradients.ZERO)]
    res["unconnected_zero_by_name"] = [val(g) for g in hvd.DistributedGradientTape(tape).gradient(
        loss, {"a": a, "b": b}, unconnected_gradients="zero").values()]
except Exception as e:  # recorded, so the other checks of this job still run
    res["unconnected_zero"] = f"{type(e).__name__}: {e}"
try:
    hvd.DistributedGradientTape(tape).gradient(loss, [a], unconnected_gradients="zeros")
except Exception as e:  # the message is checked
    res["unconnected_bad"] = str(e)

# PartialDistributedGradientTape: the local layer's gradient is not reduced (scaled by 1/size, as Horovod does)
keras.utils.set_random_seed(1)
shared, local = keras.layers.Dense(1, use_bias=False), keras.layers.Dense(1, use_bias=False)
inp = tf.ones((1, 1))
shared(inp), local(inp)
with tf.GradientTape() as tape:
    loss = (r + 1.0) * (shared(inp) + local(inp))
ptape = hvd.PartialDistributedGradientTape(tape, local_layers=local)
g_shared, g_local = ptape.gradient(loss, [shared.kernel, local.kernel])
res["partial"] = [val(g_shared), val(g_local)]

# DistributedOptimizer with a Keras 3 optimizer (Horovod's Keras wrapper fails on Keras 3)
var = keras.Variable([1.0, 1.0])
opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd.Sum)
opt.apply_gradients([(tf.constant([r + 1.0, r + 1.0]), var)])
res["optimizer_sum"] = keras.ops.convert_to_numpy(var).tolist()
# backward_passes_per_step=2: Horovod applies the sum of the two passes (the mean with
# average_aggregated_gradients=True), averaged over ranks
for key, avg in (("optimizer_bpps_sum", False), ("optimizer_bpps_mean", True)):
    var = keras.Variable([1.0, 1.0])
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2,
                                   average_aggregated_gradients=avg)
    for _ in range(2):
        opt.apply_gradients([(tf.constant([r + 1.0, r + 1.0]), var)])
    res[key] = keras.ops.convert_to_numpy(var).tolist()
res["elastic"] = [callable(getattr(hvd.elastic, k)) for k in ("run", "ObjectState", "TensorFlowState")]
try:
    hvd.SyncBatchNormalization()
except NotImplementedError as e:
    res["syncbn_error"] = str(e)
(out / f"rank{r}.json").write_text(json.dumps(res))
