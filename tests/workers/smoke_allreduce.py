"""Under horovodrun -np 2: a torch and a TensorFlow allreduce through the built Horovod."""

import json
import sys

out = sys.argv[1]

import horovod.torch as hvd_t  # noqa: E402
import torch  # noqa: E402

hvd_t.init()
r, n = hvd_t.rank(), hvd_t.size()
t_sum = hvd_t.allreduce(torch.tensor([r + 1.0, 10.0 * (r + 1)]), op=hvd_t.Sum).tolist()
t_avg = hvd_t.allreduce(torch.tensor([float(r)]), op=hvd_t.Average).tolist()

import horovod.tensorflow as hvd_tf  # noqa: E402
import tensorflow as tf  # noqa: E402

hvd_tf.init()
tf_sum = hvd_tf.allreduce(tf.constant([r + 1.0, 10.0 * (r + 1)]), op=hvd_tf.Sum).numpy().tolist()

with open(f"{out}/rank{r}.json", "w") as f:
    json.dump({"rank": r, "size": n, "torch_sum": t_sum, "torch_avg": t_avg, "tf_sum": tf_sum,
               "tf_rank": hvd_tf.rank(), "tf_size": hvd_tf.size()}, f)
