"""hvdkit's benchmark lab: suites that measure hvdkit against the peers users would pick instead.

Not part of the installed package: run it from a checkout with ``benchmarks/run`` (benchmarks/README.md).
"""
