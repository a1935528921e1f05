"""Horovod's ``horovod.torch.elastic`` names, as ``hvdkit.torch.elastic`` (``hvd.elastic.run``,
``hvd.elastic.TorchState``, ``hvd.elastic.ElasticSampler``).

Horovod's own implementation works on today's PyTorch, so these are re-exported unchanged; see
Horovod's elastic documentation for their contract. hvdkit's own elastic training is
:func:`hvdkit.torch.fit_elastic` (built on the same ``TorchState``, in :mod:`hvdkit.torch.elastic_adapter`).
"""

from horovod.common.elastic import ObjectState, State
from horovod.torch.elastic import ElasticSampler, TorchState, init, run, run_fn, shutdown

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "init", "run", "run_fn", "shutdown"]
