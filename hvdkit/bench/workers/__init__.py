"""Benchmark workers: each is run by a launcher (``python -m hvdkit.bench.workers.NAME``)."""
