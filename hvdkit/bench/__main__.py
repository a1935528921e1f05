"""``python -m hvdkit.bench``: the benchmark command."""

import sys

from hvdkit.bench.cli import main

sys.exit(main())
