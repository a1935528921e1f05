"""Under horovodrun -np 2: hvdkit's DistributedGradientTape when a variable's gradient is None on some ranks
only (rank 0 uses ``b``, rank 1 does not), eagerly and in a tf.function; then the cases that must still
work: ``b`` unused on every rank, ``b`` registered as a local source, and a traced step called three times
where rank 1 traces it again for the second and third calls and rank 0 does not (as ranks that join an
elastic job after a reset optimise the step anew, while the others keep theirs): both must still run the
same allreduces. Prints ``RESULT {json}`` per case."""

import json
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import tensorflow as tf

import hvdkit.tensorflow as hvd

hvd.init()
rank = hvd.rank()
w = tf.Variable([1.0, 2.0], name="w")
b = tf.Variable([3.0], name="b")


def loss_of(use_b: bool):
    loss = tf.reduce_sum(w * w)
    return loss + tf.reduce_sum(b) if use_b else loss


def step(use_b: bool, local_b: bool = False):
    with tf.GradientTape() as tape:
        loss = loss_of(use_b)
    dtape = hvd.DistributedGradientTape(tape)
    if local_b:
        dtape.register_local_source(b)
    grads = dtape.gradient(loss, [w, b])
    return [None if g is None else g.numpy().tolist() for g in grads]


@tf.function
def traced_step():
    with tf.GradientTape() as tape:
        loss = loss_of(rank == 0)  # decided when tracing: rank 1's graph never touches b
    return hvd.DistributedGradientTape(tape).gradient(loss, [w, b])[0]


def case(name, fn):
    try:
        result, error = fn(), None
    except Exception as exc:  # reported: every rank's message is checked
        result, error = None, f"{type(exc).__name__}: {exc}"
    print("RESULT " + json.dumps({"case": name, "rank": rank, "result": result, "error": error}), flush=True)


case("eager", lambda: step(use_b=rank == 0))
case("traced", lambda: traced_step().numpy().tolist())
case("unused_everywhere", lambda: step(use_b=False))
case("local_source", lambda: step(use_b=rank == 0, local_b=True))


def both_used():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * w) + tf.reduce_sum(b * b)  # no constant gradient: Grappler folds none
    return hvd.DistributedGradientTape(tape).gradient(loss, [w, b])


def three_calls():
    kept = tf.function(both_used)
    functions = [kept] + [tf.function(both_used) for _ in range(2)] if rank == 1 else [kept] * 3
    return [[g.numpy().tolist() for g in f()] for f in functions]


case("retraced_on_rank_1", three_calls)
