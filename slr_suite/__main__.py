"""``python -m slr_suite``: the same as the ``slr`` console script."""
import sys

from slr_suite.cli import main

sys.exit(main())
