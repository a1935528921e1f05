import sys

from hvdkit.cli import main

sys.exit(main())
