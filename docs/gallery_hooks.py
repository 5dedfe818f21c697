"""sphinx-gallery's hooks, named by their dotted path in ``conf.py`` (so the configuration pickles)."""
from __future__ import annotations

import warnings

_saved: list = []


def warnings_are_errors(gallery_conf, fname, when):
    """An example that warns fails the build: warnings are errors while it runs, and Sphinx's
    own filters come back after it."""
    if when == "before":
        _saved[:] = warnings.filters[:]
        warnings.simplefilter("error")
    else:
        warnings.filters[:] = _saved
        warnings._filters_mutated()
