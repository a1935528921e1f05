"""How this process runs: per-rank tuning (threads, Open MPI and Horovod settings) and the launcher
environment it was started by. Framework-free, like ``hvdkit.core``, but not training logic: the core
never imports it; the adapters' ``init`` and ``hvdkit doctor`` do."""
