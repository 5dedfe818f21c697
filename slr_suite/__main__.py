"""``python -m slr.suite``: the same as the ``slr`` console script."""
import sys

from slr.suite.cli import main

sys.exit(main())
