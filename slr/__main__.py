"""``python -m slr``: the same as the ``slr`` console script."""
import sys

from slr.cli import main

sys.exit(main())
