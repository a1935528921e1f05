"""Elastic training, framework-free: the loop (commit, rollback, reset), the shared data position
and the mix-in for Horovod's elastic ``State``. Submodules are imported explicitly: the package
import stays free of numpy for ``hvdkit doctor``.
"""
