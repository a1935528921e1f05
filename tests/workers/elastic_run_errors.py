"""``hvd.elastic.run`` (hvdkit.tensorflow) with real Horovod over Gloo, 2 processes (tag ELASTIC_RUN).

1. A collective named the hvdkit way fails in its kernel (Horovod was shut down under it, so the op's
   status is Horovod's "not initialized"; Horovod's own run wants "HorovodAllreduce" in the message and
   let it through). The state must roll back to its commit, Horovod re-initialise, and the call run again.
2. An ``UnknownError`` from an op that is not Horovod's must reach the caller (Horovod's run returned None).
"""

import json

import tensorflow as tf

import hvdkit.tensorflow as hvd

hvd.init(threads=1)


@tf.function
def reduce(x):
    return hvd.allreduce(x, name="hvdkit.test.0", op=hvd.Sum)


reduce(tf.ones(2))  # traced while Horovod runs
calls = []


@hvd.elastic.run
def train(state):
    calls.append(state.counter)
    state.counter += 1
    value = tf.fill([2], float(hvd.rank() + 1))
    if len(calls) == 1:
        hvd.shutdown()  # so the collective below fails in its kernel
    return reduce(value).numpy().tolist()


state = hvd.elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, counter=0)
result = train(state)
counter = state.counter  # (the next run's sync rolls it back to the commit again)


def fail():
    raise OSError("disk full")


@hvd.elastic.run
def other(state):
    return tf.py_function(fail, [], tf.float32)


try:
    returned, raised = repr(other(state)), None
except tf.errors.OpError as e:
    returned, raised = None, f"{type(e).__name__}: {'disk full' in e.message}"
print("ELASTIC_RUN", json.dumps({"rank": hvd.rank(), "size": hvd.size(), "result": result, "calls": calls,
                                 "counter": counter, "returned": returned, "raised": raised}), flush=True)
