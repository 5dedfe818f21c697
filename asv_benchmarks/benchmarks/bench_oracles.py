"""Each logistic oracle on fixed biased problems (LightGBM beside our boosted trees).

``OracleFit`` times one fit (20 boosting rounds, 1 MLP epoch) and the fitted function's
scores on held-out rows, records the fit's peak memory and tracks the biased accuracy
(train and held-out) and the mean training loss.
"""
from __future__ import annotations

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
