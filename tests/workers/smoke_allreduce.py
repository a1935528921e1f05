"""Under horovodrun -np 2: a torch and a TensorFlow allreduce through the built Horovod.

Usage: smoke_allreduce.py OUT [FRAMEWORKS], FRAMEWORKS a comma list of torch,tf (default both) and
hvdkit-torch (three SGD steps through ``hvdkit.torch.distribute`` from rank-dependent initial weights).
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

if "hvdkit-torch" in frameworks:
    import torch

    import hvdkit.torch as hk

    hk.init()
    torch.manual_seed(hk.rank())  # different initial weights: distribute() must broadcast rank 0's
    model = torch.nn.Linear(4, 1)
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1))
    gen = torch.Generator().manual_seed(100 + hk.rank())  # different data per rank: gradients must be averaged
    for _ in range(3):
        x = torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True)).backward()
        opt.step()
    result["hvdkit_torch_weights"] = [v for p in model.parameters() for v in p.detach().flatten().tolist()]
    # The same three steps in one process on both ranks' batches together: what data parallelism must give.
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    gens = [torch.Generator().manual_seed(100 + r) for r in range(hk.size())]
    for _ in range(3):
        x = torch.cat([torch.randn(8, 4, generator=g) for g in gens])
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), x.sum(1, keepdim=True)).backward()
        ref_opt.step()
    result["reference_weights"] = [v for p in ref.parameters() for v in p.detach().flatten().tolist()]
    result.update(torch_version=torch.__version__, rank=hk.rank(), size=hk.size())

with open(f"{out}/rank{result['rank']}.json", "w") as f:
    json.dump(result, f)
