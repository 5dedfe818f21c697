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


#: The gallery's order: from inference to learning, small to larger, the cluster last.
ORDER = ("plot_inference_grid.py", "plot_denoising_table.py", "plot_letters.py", "plot_text_tagging.py",
         "plot_marginals_calibration.py", "plot_partial_labels.py", "plot_dask_learner.py")


class ExampleOrder:
    """sphinx-gallery's ``within_subsection_order``: :data:`ORDER`, then any other example by name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename: str):
        return (ORDER.index(filename), "") if filename in ORDER else (len(ORDER), filename)
