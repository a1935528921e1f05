"""Benchmarks that measure hvdkit side by side with the peers users would pick instead.

``hvdkit bench`` / ``python -m hvdkit.bench``: each suite launches real multi-process jobs
(horovodrun, torchrun, mpirun, TF_CONFIG workers) in one run, writes JSON, prints a table of
measured values and ratios, and draws PNG plots. See docs/benchmarks.md.
"""
