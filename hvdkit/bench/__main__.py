import sys

from hvdkit.bench.cli import main

sys.exit(main())
