"""Benchmark workers: each is started by a launcher as ``python -m benchmarks.workers.NAME`` from the
repository root (``benchmarks.jobs.run_worker``)."""
