"""Each logistic oracle on fixed biased problems (LightGBM beside our boosted trees).

``OracleFit`` times one fit (20 boosting rounds, 1 MLP epoch) and the fitted function's
scores on held-out rows, records the fit's peak memory and tracks the biased accuracy
(train and held-out) and the mean training loss.
"""
from __future__ import annotations

import numpy as np

from slr import oracles

from . import common

ORACLES = ["Zero", "Constant", "Linear", "BoostedTrees", "LightGBM", "MLP"]
PROBLEMS = {"unary_20k_K2": (20_000, 2), "pairwise_40k_K4": (40_000, 4)}


class OracleFit(common.OracleEstimator, common.Benchmark):
    """One oracle fit on a 20k-row unary or 40k-row pairwise problem."""

    params = (list(PROBLEMS), ORACLES)
    param_names = ["problem", "oracle"]

    def setup_cache(self):
        return self.fit_all()

    def make_data(self, problem, oracle):
        features, bias, labels = common.biased_problem(*PROBLEMS[problem])
        features_t, bias_t, labels_t = common.biased_problem(*PROBLEMS[problem], seed=1)
        return (features, bias), labels, (features_t, bias_t), labels_t

    def make_estimator(self, problem, oracle):
        if oracle == "BoostedTrees":
            return oracles.BoostedTrees(n_rounds=20, subsample=5000, random_state=0)
        if oracle == "LightGBM":
            return oracles.LightGBM(n_rounds=20, subsample=5000, random_state=0)
        if oracle == "MLP":
            return oracles.MLP(n_epochs=1, batch_size=1000, random_state=0)
        return getattr(oracles, oracle)()


def lightgbm_refits(n_fits: int = 4, n_rounds: int = 5, shift: float = 0.2) -> tuple[float, int]:
    """The structured learner's use of the LightGBM oracle on a 77k-node unary problem (a denoising
    set of 8 images of 98 x 98): a fit of 30 rounds, then ``n_fits`` fits of ``n_rounds`` on the
    same rows, each for the last bias moved by ``shift``; so few rounds from 0 end above the function
    they replace, and such a fit boosts on from it (the ensemble grows; a fit's cost should not).
    Returns the mean training loss and how many fits continued."""
    features, bias, labels = common.biased_problem(76_832, 2)
    rng = np.random.default_rng(0)
    oracle = oracles.LightGBM(n_rounds=30, random_state=0).fit(features, bias, labels)
    oracle.set_params(n_rounds=n_rounds)
    continued = 0
    for _ in range(n_fits):
        bias = bias + shift * rng.normal(size=bias.shape)
        oracle.fit(features, bias, labels)
        continued += oracle.continued_
    return oracle.loss(features, bias, labels) / labels.size, continued


class LightGBMRefits(common.Benchmark):
    """:func:`lightgbm_refits` timed: guarded rounds that predict only their own trees and evaluate
    the loss with one exponential per entry, and fits that boost on from the replaced function's
    kept training scores."""

    def time_refit_sequence(self):
        lightgbm_refits()

    def track_continued_fits(self):
        return lightgbm_refits()[1]

    track_continued_fits.unit = "fits of 4"
