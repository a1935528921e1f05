"""Under horovodrun -np 2: a torch and a TensorFlow allreduce through the built Horovod.

Usage: smoke_allreduce.py OUT [FRAMEWORKS], FRAMEWORKS a comma list of torch,tf (default both).
"""

import json
import platform
import sys

out = sys.argv[1]
frameworks = (sys.argv[2] if len(sys.argv) > 2 else "torch,tf").split(",")
result: dict = {"python": platform.python_version()}

import hvdkit  # noqa: E402,F401  (the package imports on this interpreter)

if "torch" in frameworks:
    import horovod.torch as hvd_t
    import torch

    hvd_t.init()
    r, n = hvd_t.rank(), hvd_t.size()
    result["torch_sum"] = hvd_t.allreduce(torch.tensor([r + 1.0, 10.0 * (r + 1)]), op=hvd_t.Sum).tolist()
    result["torch_avg"] = hvd_t.allreduce(torch.tensor([float(r)]), op=hvd_t.Average).tolist()
    result.update(rank=r, size=n)

if "tf" in frameworks:
    import horovod.tensorflow as hvd_tf
    import tensorflow as tf

    hvd_tf.init()
    r = hvd_tf.rank()
    result["tf_sum"] = hvd_tf.allreduce(tf.constant([r + 1.0, 10.0 * (r + 1)]), op=hvd_tf.Sum).numpy().tolist()
    result.update(tf_rank=r, tf_size=hvd_tf.size(), rank=r, size=hvd_tf.size())

with open(f"{out}/rank{result['rank']}.json", "w") as f:
    json.dump(result, f)
