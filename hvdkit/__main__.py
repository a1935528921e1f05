"""``python -m hvdkit``: the ``hvdkit`` command."""

import sys

from hvdkit.cli import main

sys.exit(main())
