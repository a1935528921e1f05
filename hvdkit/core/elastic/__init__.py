"""Elastic training, framework-free: the loop that owns commit, rollback and reset
(:mod:`~hvdkit.core.elastic.loop`), the data position every worker agrees on without an allgather
(:mod:`~hvdkit.core.elastic.sampler`), and the mix-in that puts both into a Horovod elastic
``State`` (:mod:`~hvdkit.core.elastic.state`). Adapters supply only their ``State`` class and a
function that runs a list of steps.

Nothing here imports numpy at package import (``hvdkit doctor`` imports the core in bare
environments); import the submodules.
"""
