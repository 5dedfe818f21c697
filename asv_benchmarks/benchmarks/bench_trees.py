"""Boosted trees: ``slr.oracles.BoostedTrees`` against the ``LightGBM`` adapter.

Problems have the size and features of the paper's denoising experiment (16 images of
100 x 100, 4-connected): the unary problem has 160,000 rows, features
``(1, phi_i)`` and K = 2 classes; the pairwise one 316,800 rows, features
``(1, phi_ij)`` and K = 4 pair labels. The biases are random, as the learner's messages
would be mid-run. Both oracles draw 10,000 rows per round and grow trees of at most
31 leaves with at least 1% of the subset per leaf, on one thread.

``asv_benchmarks/compare_trees.py`` measures the same things side by side and prints
the ratios; the ``track_*ratio`` benchmarks here record them in asv. ``BoostingRound`` fits
each oracle once in ``setup_cache``, then times ``fit`` and ``predict`` and tracks the
accuracy and loss of that fit; ``TrainingLoss`` and ``Ratios`` read one shared 200-round
cache.
"""
from __future__ import annotations

import time

import numpy as np

try:                                    # asv imports the package; compare_trees.py the file
    from . import common
except ImportError:
    import common

PROBLEMS = {"unary_160k_K2": (160_000, 2), "pairwise_316k_K4": (316_800, 4)}
LEAVES = 31
SUBSAMPLE = 10_000
THREADS = 1


def make_problem(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, biases and labels of a denoising-sized biased logistic problem.

    Unary rows follow the paper's noise model (``phi ~ U[0, .9]`` for label 0,
    ``U[.1, 1]`` for label 1); pair labels ``a * 2 + b`` have equal ends with
    probability .9 and ``phi ~ U[0, .8]`` if the ends agree, ``U[.2, 1]`` otherwise.
    Biases are standard normal.
    """
    n, k = PROBLEMS[name]
    rng = np.random.default_rng(seed)
    if k == 2:
        labels = rng.integers(0, 2, n)
        phi = np.where(labels == 0, rng.uniform(0.0, 0.9, n), rng.uniform(0.1, 1.0, n))
    else:
        a = rng.integers(0, 2, n)
        b = np.where(rng.random(n) < 0.9, a, 1 - a)
        labels = 2 * a + b
        phi = np.where(a == b, rng.uniform(0.0, 0.8, n), rng.uniform(0.2, 1.0, n))
    features = np.column_stack([np.ones(n), phi])
    bias = rng.normal(size=(n, k))
    return features, bias, labels


def make_oracle(kind: str, n_rounds: int, leaves: int | None = LEAVES, threads: int = THREADS,
                seed: int = 0):
    """``BoostedTrees`` or ``LightGBM`` with matched subsample, leaf count and threads."""
    from slr.oracles.lightgbm_adapter import LightGBM
    from slr.oracles.trees import BoostedTrees

    if kind == "BoostedTrees":
        return BoostedTrees(n_rounds=n_rounds, subsample=SUBSAMPLE, max_leaves=leaves,
                            n_jobs=threads, random_state=seed)
    if kind == "LightGBM":
        return LightGBM(n_rounds=n_rounds, subsample=SUBSAMPLE, num_leaves=leaves,
                        n_jobs=threads, random_state=seed)
    raise ValueError(f"unknown oracle {kind!r}")


def mean_loss(oracle, features, bias, labels) -> float:
    """The fitted oracle's biased logistic loss per row."""
    return oracle.loss(features, bias, labels) / features.shape[0]


class BoostingRound(common.OracleEstimator, common.Benchmark):
    """A 20-round fit (divide ``time_fit`` by 20 for the time per round) and its scores.

    ``time_predict`` evaluates the 20 trees on a second problem of the same size.
    """

    params = (list(PROBLEMS), ["BoostedTrees", "LightGBM"])
    param_names = ["problem", "oracle"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, problem, oracle):
        features, bias, labels = make_problem(problem)
        features_t, bias_t, labels_t = make_problem(problem, seed=1)
        return (features, bias), labels, (features_t, bias_t), labels_t

    def make_estimator(self, problem, oracle):
        return make_oracle(oracle, 20)


class Rounds200(common.Benchmark):
    """Both oracles fitted for 200 rounds on every problem, timed, in one cache.

    Subclasses inherit this one ``setup_cache``, so asv fits once for all of them:
    ``{problem: {oracle: (seconds, mean training loss)}}``.
    """

    timeout = 900

    def setup_cache(self):
        results = {}
        for problem in PROBLEMS:
            data = make_problem(problem)
            row = {}
            for kind in ("BoostedTrees", "LightGBM"):
                oracle = make_oracle(kind, 200)
                start = time.perf_counter()
                oracle.fit(*data)
                row[kind] = (time.perf_counter() - start, mean_loss(oracle, *data))
            results[problem] = row
        return results


class TrainingLoss(Rounds200):
    """Mean biased logistic loss on the training rows after 200 rounds."""

    params = (list(PROBLEMS), ["BoostedTrees", "LightGBM"])
    param_names = ["problem", "oracle"]

    def track_loss_200_rounds(self, results, problem, oracle):
        return results[problem][oracle][1]

    track_loss_200_rounds.unit = "nats per row"


class Ratios(Rounds200):
    """BoostedTrees / LightGBM, measured back to back in one process.

    Goals (issue 4): time per round <= 1.5, training loss after 200 rounds <= 1.02.
    """

    params = list(PROBLEMS)
    param_names = ["problem"]

    def track_time_ratio(self, results, problem):
        return results[problem]["BoostedTrees"][0] / results[problem]["LightGBM"][0]

    def track_loss_ratio(self, results, problem):
        return results[problem]["BoostedTrees"][1] / results[problem]["LightGBM"][1]

    track_time_ratio.unit = "ratio"
    track_loss_ratio.unit = "ratio"
