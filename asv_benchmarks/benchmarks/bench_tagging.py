"""slr's defaults against CRFsuite on the real tagged corpora kept out of the tuning of defaults.

Per corpus, :func:`compare_tagging.compare` fits CRFsuite (L-BFGS, ``c1 = c2 = .1``, 100 iterations)
and slr (``Linear(l2=1)`` oracles, every other setting at the library's default) each in a fresh
process on sklearn-crfsuite's tutorial features. Tracked: the fit seconds slr needs to reach
CRFsuite's test score (within .005) over CRFsuite's fit seconds, and slr's peak resident memory
over CRFsuite's (both processes measured the same way: interpreter, libraries, data and fit).
``python asv_benchmarks/compare_tagging.py`` prints the table behind them.
"""
from __future__ import annotations

import sys
from pathlib import Path

try:                                    # asv imports the package; the script runs the file
    from . import common
except ImportError:
    import common


def _compare(corpus: str) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        from compare_tagging import compare
    finally:
        sys.path.pop(0)
    return compare(corpus, l2=1.0)


class TaggingAgainstCRFsuite(common.Benchmark):
    """Time to CRFsuite's test score and peak memory, slr over CRFsuite, per corpus."""

    params = ["hironsan", "turkish"]
    param_names = ["corpus"]
    timeout = 1800

    def setup_cache(self):
        return {corpus: _compare(corpus) for corpus in self.params}

    def track_slr_to_crfsuite_score_over_crfsuite_seconds(self, results, corpus):
        return results[corpus]["time_ratio"]

    def track_slr_over_crfsuite_peak_memory(self, results, corpus):
        return results[corpus]["memory_ratio"]

    track_slr_to_crfsuite_score_over_crfsuite_seconds.unit = "ratio"
    track_slr_over_crfsuite_peak_memory.unit = "ratio"
