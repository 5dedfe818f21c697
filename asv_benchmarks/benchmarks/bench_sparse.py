"""Sequence labelling with sparse indicator features: time and peak memory on a grid of sizes.

``SparseChains`` fits slr's defaults (``Linear`` oracles, the joint solver) to synthetic tagged
sequences of :func:`slr.datasets.sparse_chains.make_sparse_chains` (9 tags, 10 features per token)
on a grid of tokens x features, and tracks the held-out token accuracy. Peak memory should grow
with the tokens and the features, never with the square of the features (the Linear oracle's
diagonal solver; a block preconditioner would need 9 D^2 numbers, 72 GB at D = 10^5).

Run as a script (``python asv_benchmarks/benchmarks/bench_sparse.py``) for the whole curve in one
process per size: fit seconds and peak resident memory of a fresh process, with CRFsuite's beside
it where python-crfsuite is installed.
"""
from __future__ import annotations

import resource
import subprocess
import sys
import time

import numpy as np

from slr.datasets.sparse_chains import make_sparse_chains
from slr.learner import StructuredLogisticRegression
from slr.oracles import Linear

try:                                    # asv imports the package; the script runs the file
    from . import common
except ImportError:
    import common

TOKENS = [10_000, 100_000]
FEATURES = [10_000, 100_000]


def _data(n_tokens: int, n_features: int):
    X, Y = make_sparse_chains(n_tokens, n_features, random_state=0)
    X_test, Y_test = make_sparse_chains(10_000, n_features, random_state=1)
    return X, Y, X_test, Y_test


def _learner() -> StructuredLogisticRegression:
    return StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), random_state=0)


class SparseChains(common.Estimator, common.Benchmark):
    """slr's defaults on sparse tagged sequences, tokens x features."""

    params = (TOKENS, FEATURES)
    param_names = ["tokens", "features"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, n_tokens, n_features):
        return _data(n_tokens, n_features)

    def make_estimator(self, n_tokens, n_features):
        return _learner()

    def score(self, estimator, X, Y) -> float:
        return float(np.mean(np.concatenate(estimator.predict(X)) == np.concatenate(Y)))


def _measure(n_tokens: int, n_features: int) -> None:
    """One size in this process: prints tokens, features, fit seconds, peak RSS (MiB), accuracy."""
    X, Y, X_test, Y_test = _data(n_tokens, n_features)
    start = time.perf_counter()
    model = _learner().fit(X, Y)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    accuracy = np.mean(np.concatenate(model.predict(X_test)) == np.concatenate(Y_test))
    print(f"{n_tokens:>9} {n_features:>9} {seconds:>8.1f} {peak:>9.0f} {accuracy:>8.4f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        _measure(int(sys.argv[1]), int(sys.argv[2]))
    else:
        print(f"{'tokens':>9} {'features':>9} {'fit s':>8} {'peak MiB':>9} {'accuracy':>8}", flush=True)
        for tokens, features in [(10_000, 10_000), (100_000, 10_000), (100_000, 100_000), (300_000, 300_000),
                                 (1_000_000, 1_000_000)]:
            subprocess.run([sys.executable, __file__, str(tokens), str(features)], check=True)
