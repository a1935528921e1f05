"""Benchmark workers: each is run by a launcher (``python -m hvdkit.bench.workers.NAME``).

Importing the package gives the rank's session the priority the driver runs at (``hvdkit.bench.priority``).
"""

from hvdkit.bench.priority import apply_session_nice

apply_session_nice()
